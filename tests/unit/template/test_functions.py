"""Every HOT function: results, bad arguments and version availability (table-driven).

Real: the template layer; resource types are the declaration-only test types.
A function whose arguments are all known is evaluated when the stack loads;
one that needs a resource attribute is evaluated when the resource resolves.
Both paths are exercised (`dep` is a resource whose `output` is given).
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from services.engine.template import (
    ResolutionError,
    ResourceData,
    TemplateInvalid,
    load_stack,
    resolve_properties,
)
from shared.errors import InvalidInput

from .helpers import IDENTITY, TYPES

LATEST = "2021-04-16"
DEP = {"get_attr": ["dep", "output"]}


def _template(version: str, snippet: Any) -> dict[str, Any]:
    template: dict[str, Any] = {
        "heat_template_version": version,
        "parameters": {
            "p_str": {"type": "string", "default": "hello"},
            "p_list": {"type": "comma_delimited_list", "default": "a,b"},
            "p_json": {"type": "json", "default": {"k": "v", "n": [1, 2]}},
            "p_num": {"type": "number", "default": 3},
            "p_bool": {"type": "boolean", "default": True},
        },
        "resources": {
            "dep": {"type": "OS::Heat::TestResource"},
            "subject": {"type": "OS::Heat::Value", "properties": {"value": snippet}},
        },
    }
    if version >= "2016-10-14":
        template["conditions"] = {"yes": True, "no": False}
    return template


def evaluate(snippet: Any, *, version: str = LATEST, output: Any = "out") -> Any:
    stack = load_stack(_template(version, snippet), types=TYPES, identity=IDENTITY)
    data = {"dep": ResourceData("dep-id", {"output": output})}
    return resolve_properties(stack, "subject", data).get("value")


# (id, version, snippet, dep output, expected)
OK: list[tuple[str, str, Any, Any, Any]] = [
    ("get_param", LATEST, {"get_param": "p_str"}, None, "hello"),
    ("get_param list path", LATEST, {"get_param": ["p_list", 1]}, None, "b"),
    ("get_param json path", LATEST, {"get_param": ["p_json", "n", 0]}, None, 1),
    ("get_param missing key", LATEST, {"get_param": ["p_json", "nope"]}, None, ""),
    ("get_param number", LATEST, {"get_param": "p_num"}, None, 3),
    ("get_param boolean", LATEST, {"get_param": "p_bool"}, None, True),
    ("pseudo stack_name", LATEST, {"get_param": "OS::stack_name"}, None, "teststack"),
    ("pseudo stack_id", LATEST, {"get_param": "OS::stack_id"}, None, "sid-1"),
    ("pseudo project_id", LATEST, {"get_param": "OS::project_id"}, None, "pid-1"),
    ("get_resource", LATEST, {"get_resource": "dep"}, None, "dep-id"),
    ("get_attr", LATEST, DEP, "o", "o"),
    ("get_attr path", LATEST, {"get_attr": ["dep", "output", "a", 1]}, {"a": [0, 9]}, 9),
    ("get_attr missing path", LATEST, {"get_attr": ["dep", "output", "zz"]}, {"a": 1}, None),
    ("get_attr all", LATEST, {"get_attr": ["dep"]}, "o", {"output": "o"}),
    ("list_join", LATEST, {"list_join": [",", ["a", "b"]]}, None, "a,b"),
    ("list_join lists", LATEST, {"list_join": ["-", ["a"], ["b", "c"]]}, None, "a-b-c"),
    ("list_join json", LATEST, {"list_join": [",", [{"a": 1}, None]]}, None, '{"a": 1},'),
    ("list_join dynamic", LATEST, {"list_join": [",", DEP]}, ["x", "y"], "x,y"),
    ("list_join dynamic item", LATEST, {"list_join": [",", ["a", DEP]]}, "z", "a,z"),
    ("str_replace", LATEST, {"str_replace": {"template": "a $x", "params": {"$x": 1}}}, None, "a 1"),
    (
        "str_replace longest first",
        LATEST,
        {"str_replace": {"template": "$a $ab", "params": {"$a": "1", "$ab": "2"}}},
        None,
        "1 2",
    ),
    (
        "str_replace no rescan",
        LATEST,
        {"str_replace": {"template": "X", "params": {"X": "Y", "Y": "Z"}}},
        None,
        "Y",
    ),
    (
        "str_replace dynamic",
        LATEST,
        {"str_replace": {"template": "v=V", "params": {"V": DEP}}},
        "dyn",
        "v=dyn",
    ),
    (
        "str_replace_strict",
        LATEST,
        {"str_replace_strict": {"template": "a B", "params": {"B": "b"}}},
        None,
        "a b",
    ),
    (
        "str_replace_vstrict",
        LATEST,
        {"str_replace_vstrict": {"template": "a B", "params": {"B": 0}}},
        None,
        "a 0",
    ),
    ("str_split", LATEST, {"str_split": [",", "a,b"]}, None, ["a", "b"]),
    ("str_split index", LATEST, {"str_split": [",", "a,b", 1]}, None, "b"),
    ("str_split dynamic", LATEST, {"str_split": [":", DEP, "0"]}, "h:p", "h"),
    ("Fn::Join", "2013-05-23", {"Fn::Join": ["-", ["a", "b"]]}, None, "a-b"),
    ("Fn::Select", "2014-10-16", {"Fn::Select": [1, ["a", "b"]]}, None, "b"),
    ("Fn::Select out of range", "2014-10-16", {"Fn::Select": [5, ["a"]]}, None, ""),
    ("Fn::Split", "2013-05-23", {"Fn::Split": [",", "a,b"]}, None, ["a", "b"]),
    ("Fn::Replace", "2013-05-23", {"Fn::Replace": [{"x": "y"}, "axa"]}, None, "aya"),
    ("Fn::Base64", "2013-05-23", {"Fn::Base64": "text"}, None, "text"),
    ("Ref param", "2013-05-23", {"Ref": "p_str"}, None, "hello"),
    ("Ref resource", "2013-05-23", {"Ref": "dep"}, None, "dep-id"),
    (
        "repeat",
        LATEST,
        {"repeat": {"for_each": {"%x%": ["a", "b"]}, "template": {"k": "v-%x%"}}},
        None,
        [{"k": "v-a"}, {"k": "v-b"}],
    ),
    (
        "repeat product",
        LATEST,
        {"repeat": {"for_each": {"X": ["1", "2"], "Y": ["a", "b"]}, "template": "XY"}},
        None,
        ["1a", "1b", "2a", "2b"],
    ),
    (
        "repeat zipped",
        LATEST,
        {
            "repeat": {
                "for_each": {"X": ["1", "2"], "Y": ["a", "b"]},
                "template": "XY",
                "permutations": False,
            }
        },
        None,
        ["1a", "2b"],
    ),
    (
        "repeat dynamic",
        LATEST,
        {"repeat": {"for_each": {"X": DEP}, "template": "<X>"}},
        ["p", "q"],
        ["<p>", "<q>"],
    ),
    (
        "repeat over map keys",
        "2016-10-14",
        {"repeat": {"for_each": {"K": {"a": 1}}, "template": "K"}},
        None,
        ["a"],
    ),
    ("digest", LATEST, {"digest": ["sha512", "x"]}, None, hashlib.sha512(b"x").hexdigest()),
    ("digest dynamic", LATEST, {"digest": ["md5", DEP]}, "hello", "5d41402abc4b2a76b9719d911017c592"),
    ("map_merge", LATEST, {"map_merge": [{"a": 1}, {"a": 2, "b": 3}]}, None, {"a": 2, "b": 3}),
    ("map_merge dynamic", LATEST, {"map_merge": [{"a": 1}, DEP]}, {"b": 2}, {"a": 1, "b": 2}),
    (
        "map_replace",
        LATEST,
        {"map_replace": [{"k1": "v1", "k2": "v2"}, {"keys": {"k1": "K1"}, "values": {"v2": "V2"}}]},
        None,
        {"K1": "v1", "k2": "V2"},
    ),
    ("list_concat", LATEST, {"list_concat": [["a"], ["b"], None]}, None, ["a", "b"]),
    ("list_concat dynamic", LATEST, {"list_concat": [["a"], DEP]}, ["b"], ["a", "b"]),
    ("list_concat_unique", LATEST, {"list_concat_unique": [["a", "b"], ["b", "c"]]}, None, ["a", "b", "c"]),
    ("contains true", LATEST, {"contains": ["a", ["a", "b"]]}, None, True),
    ("contains false", LATEST, {"contains": ["z", {"get_param": "p_list"}]}, None, False),
    ("contains dynamic", LATEST, {"contains": ["x", DEP]}, ["x"], True),
    ("filter", LATEST, {"filter": [["b"], ["a", "b", "c", "b"]]}, None, ["a", "c"]),
    ("filter dynamic", LATEST, {"filter": [[None], DEP]}, ["a", None], ["a"]),
    (
        "make_url",
        LATEST,
        {"make_url": {"scheme": "http", "host": "h", "port": 80, "path": "/p", "query": {"a": "b c"}}},
        None,
        "http://h:80/p?a=b+c",
    ),
    ("make_url ipv6", LATEST, {"make_url": {"scheme": "http", "host": "::1"}}, None, "http://[::1]"),
    ("get_file", LATEST, {"get_file": "f.txt"}, None, "file text"),
    ("if true", LATEST, {"if": ["yes", "a", "b"]}, None, "a"),
    ("if false", LATEST, {"if": ["no", "a", "b"]}, None, "b"),
    ("if inline condition", LATEST, {"if": [{"equals": [{"get_param": "p_num"}, 3]}, 1, 2]}, None, 1),
    ("if boolean", LATEST, {"if": [False, 1, 2]}, None, 2),
    ("if nullable drops item", LATEST, ["a", {"if": ["no", "b"]}, "c"], None, ["a", "c"]),
    ("if nullable drops key", LATEST, {"x": {"if": ["no", 1]}, "y": 2}, None, {"y": 2}),
    ("if selects dynamic branch", LATEST, {"if": ["yes", DEP, "static"]}, "dyn", "dyn"),
    (
        "nested functions",
        LATEST,
        {"list_join": ["", [{"str_split": [",", "a,b", 0]}, {"get_param": "p_str"}]]},
        None,
        "ahello",
    ),
]


@pytest.mark.parametrize(
    ("version", "snippet", "output", "expected"), [c[1:] for c in OK], ids=[c[0] for c in OK]
)
def test_function_result(version: str, snippet: Any, output: Any, expected: Any) -> None:
    stack = load_stack(
        _template(version, snippet), types=TYPES, identity=IDENTITY, files={"f.txt": "file text"}
    )
    data = {"dep": ResourceData("dep-id", {"output": output})}
    assert resolve_properties(stack, "subject", data).get("value") == expected


# (id, version, snippet, dep output, expected message fragment) - errors at load time
LOAD_ERRORS: list[tuple[str, str, Any, str]] = [
    ("get_param unknown", LATEST, {"get_param": "nope"}, "unknown parameter 'nope'"),
    ("get_param bad args", LATEST, {"get_param": {"a": 1}}, "expected <parameter name>"),
    ("get_resource unknown", LATEST, {"get_resource": "ghost"}, "unknown resource 'ghost'"),
    ("get_attr unknown resource", LATEST, {"get_attr": ["ghost", "x"]}, "unknown resource 'ghost'"),
    ("get_attr undeclared attribute", LATEST, {"get_attr": ["dep", "nope"]}, "has no attribute 'nope'"),
    (
        "get_attr all needs 2015-10-15",
        "2015-04-30",
        {"get_attr": ["dep"]},
        "expected [<resource>, <attribute>",
    ),
    ("get_attr not a list", LATEST, {"get_attr": "dep"}, "get_attr: expected"),
    (
        "get_attr dynamic name",
        LATEST,
        {"get_attr": [{"get_attr": ["dep", "output"]}, "x"]},
        "must not depend on resources",
    ),
    ("list_join delimiter", LATEST, {"list_join": [1, ["a"]]}, "delimiter must be a string"),
    ("list_join number item", LATEST, {"list_join": [",", [1]]}, "items to join must be"),
    (
        "list_join one list only before 2015-10-15",
        "2015-04-30",
        {"list_join": [",", ["a"], ["b"]]},
        "expected [<delimiter>, <list>]",
    ),
    ("list_join not a list", LATEST, {"list_join": "a"}, "arguments must be a list"),
    ("str_replace keys", LATEST, {"str_replace": {"template": "a"}}, "'template' and 'params'"),
    (
        "str_replace map value before 2015-10-15",
        "2015-04-30",
        {"str_replace": {"template": "a", "params": {"a": {"x": 1}}}},
        "must be a string or number",
    ),
    (
        "str_replace_strict missing param",
        LATEST,
        {"str_replace_strict": {"template": "a", "params": {"b": "c"}}},
        "params not found in the template: 'b'",
    ),
    (
        "str_replace_vstrict empty value",
        LATEST,
        {"str_replace_vstrict": {"template": "a", "params": {"a": ""}}},
        "empty or undefined value",
    ),
    ("str_split index out of range", LATEST, {"str_split": [",", "a", 3]}, "out of range"),
    ("str_split bad index", LATEST, {"str_split": [",", "a", "x"]}, "index must be an integer"),
    ("repeat missing template", LATEST, {"repeat": {"for_each": {"x": []}}}, "'for_each' and 'template'"),
    ("repeat not a list", LATEST, {"repeat": {"for_each": {"x": "ab"}, "template": "x"}}, "must be a list"),
    (
        "repeat zipped lengths",
        LATEST,
        {"repeat": {"for_each": {"x": ["1"], "y": []}, "template": "x", "permutations": False}},
        "equally long",
    ),
    (
        "repeat permutations before pike",
        "2017-02-24",
        {"repeat": {"for_each": {"x": ["1"]}, "template": "x", "permutations": False}},
        "'for_each' and 'template'",
    ),
    ("digest algorithm", LATEST, {"digest": ["rot13", "x"]}, "unknown algorithm 'rot13'"),
    ("digest value", LATEST, {"digest": ["md5", 1]}, "the value must be a string"),
    ("map_merge item", LATEST, {"map_merge": [{"a": 1}, ["b"]]}, "each merged item must be a map"),
    ("map_replace collision", LATEST, {"map_replace": [{"a": 1, "b": 2}, {"keys": {"a": "b"}}]}, "collides"),
    ("map_replace kinds", LATEST, {"map_replace": [{"a": 1}, {"colours": {}}]}, "unknown replacement kind"),
    ("list_concat string", LATEST, {"list_concat": [["a"], "b"]}, "must be a list"),
    ("contains arity", LATEST, {"contains": ["a"]}, "wrong number of arguments"),
    ("filter not a list", LATEST, {"filter": [["a"], "abc"]}, "the sequence must be a list"),
    ("make_url bad key", LATEST, {"make_url": {"host": "h", "pot": 80}}, "unknown key(s) pot"),
    ("make_url bad port", LATEST, {"make_url": {"host": "h", "port": 70000}}, "invalid port 70000"),
    ("make_url scheme colon", LATEST, {"make_url": {"scheme": "http:", "host": "h"}}, "must not contain ':'"),
    ("get_file missing", LATEST, {"get_file": "nope.txt"}, "no content for 'nope.txt'"),
    ("if arity", "2018-08-31", {"if": ["yes", "a"]}, "if: expected"),
    ("if unknown condition", LATEST, {"if": ["maybe", 1, 2]}, "unknown condition 'maybe'"),
    (
        "if function not allowed in condition",
        LATEST,
        {"if": [{"get_resource": "dep"}, 1, 2]},
        "not allowed in a condition",
    ),
    (
        "yaql bad expression",
        LATEST,
        {"yaql": {"expression": "invalid(", "data": {}}},
        "yaql: Bad expression Parse error: unexpected end of statement",
    ),
    ("equals outside conditions", LATEST, {"equals": [1, 1]}, "is a condition function"),
    (
        "list_concat before pike",
        "2017-02-24",
        {"list_concat": [["a"]]},
        "needs heat_template_version 2017-09-01",
    ),
    (
        "contains before pike",
        "2017-02-24",
        {"contains": ["a", ["a"]]},
        "needs heat_template_version 2017-09-01",
    ),
    (
        "make_url before pike",
        "2017-02-24",
        {"make_url": {"host": "h"}},
        "needs heat_template_version 2017-09-01",
    ),
    ("filter before ocata", "2016-10-14", {"filter": [[], []]}, "needs heat_template_version 2017-02-24"),
    (
        "str_replace_strict before ocata",
        "2016-10-14",
        {"str_replace_strict": {"template": "", "params": {}}},
        "2017-02-24",
    ),
    ("if before newton", "2016-04-08", {"if": [True, 1, 2]}, "needs heat_template_version 2016-10-14"),
    ("map_replace before newton", "2016-04-08", {"map_replace": [{}, {}]}, "2016-10-14"),
    ("map_merge before mitaka", "2015-10-15", {"map_merge": [{}]}, "needs heat_template_version 2016-04-08"),
    (
        "str_split before liberty",
        "2015-04-30",
        {"str_split": [",", "a"]},
        "needs heat_template_version 2015-10-15",
    ),
    ("repeat before kilo", "2014-10-16", {"repeat": {"for_each": {}, "template": ""}}, "2015-04-30"),
    ("digest before kilo", "2014-10-16", {"digest": ["md5", "a"]}, "2015-04-30"),
    (
        "Fn::Join after 2013",
        "2014-10-16",
        {"Fn::Join": [",", []]},
        "not available after heat_template_version 2013-05-23",
    ),
    (
        "Fn::Select after juno",
        "2015-10-15",
        {"Fn::Select": [0, []]},
        "not available after heat_template_version 2015-04-30",
    ),
    ("Ref after 2013", LATEST, {"Ref": "dep"}, "use get_resource or get_param"),
    ("Fn::GetAZs not supported", "2013-05-23", {"Fn::GetAZs": ""}, "not supported"),
    ("resource_facade bad argument", LATEST, {"resource_facade": "tags"}, "should be one of"),
]


@pytest.mark.parametrize(
    ("version", "snippet", "fragment"), [c[1:] for c in LOAD_ERRORS], ids=[c[0] for c in LOAD_ERRORS]
)
def test_function_error_at_load(version: str, snippet: Any, fragment: str) -> None:
    with pytest.raises(TemplateInvalid) as caught:
        load_stack(_template(version, snippet), types=TYPES, identity=IDENTITY, files={})
    messages = [str(e) for e in caught.value.errors]
    assert len(messages) == 1, messages  # one mistake, one error: no follow-on noise
    assert fragment in messages[0]
    assert all(e.path.startswith("resources.subject.properties.value") for e in caught.value.errors)


# (id, snippet, dep output, fragment) - errors only known when the dependency's data arrives
RESOLVE_ERRORS: list[tuple[str, Any, Any, str]] = [
    ("list_join of a string", {"list_join": [",", DEP]}, "abc", "must be a list"),
    (
        "str_replace template not string",
        {"str_replace": {"template": DEP, "params": {}}},
        5,
        "template must be a string",
    ),
    (
        "str_replace_vstrict empty",
        {"str_replace_vstrict": {"template": "a", "params": {"a": DEP}}},
        None,
        "empty or undefined",
    ),
    ("map_merge of a list", {"map_merge": [DEP]}, ["x"], "must be a map"),
    ("repeat of a number", {"repeat": {"for_each": {"x": DEP}, "template": "x"}}, 5, "must be a list"),
    ("digest of a map", {"digest": ["md5", DEP]}, {"a": 1}, "must be a string"),
    ("contains in a number", {"contains": ["a", DEP]}, 3, "must be a list"),
    ("make_url port", {"make_url": {"host": "h", "port": DEP}}, "http", "invalid port"),
    ("str_split index", {"str_split": [",", DEP, 4]}, "a,b", "out of range"),
]


@pytest.mark.parametrize(
    ("snippet", "output", "fragment"), [c[1:] for c in RESOLVE_ERRORS], ids=[c[0] for c in RESOLVE_ERRORS]
)
def test_function_error_at_resolution(snippet: Any, output: Any, fragment: str) -> None:
    with pytest.raises(ResolutionError) as caught:
        evaluate(snippet, output=output)
    assert fragment in str(caught.value)
    assert caught.value.path.startswith("resources.subject.properties.value")
    assert isinstance(caught.value, InvalidInput)


def test_missing_dependency_data_is_a_resolution_error() -> None:
    stack = load_stack(_template(LATEST, DEP), types=TYPES, identity=IDENTITY)
    with pytest.raises(ResolutionError, match="no data for resource 'dep'"):
        resolve_properties(stack, "subject", {})
