"""Parameters: types, constraints, precedence of values, hidden/immutable flags.

Real: the template layer with the declaration-only test types.
"""

from __future__ import annotations

from typing import Any

import pytest

from services.engine.template import TemplateInvalid, load_stack
from services.engine.template.constraints import ParamType
from services.engine.template.parameters import coerce

from .helpers import IDENTITY, TYPES


def _stack(params_section: dict[str, Any], **kwargs: Any) -> Any:
    template = {
        "heat_template_version": "2018-08-31",
        "parameters": params_section,
        "resources": {"r": {"type": "OS::Heat::None"}},
    }
    return load_stack(template, types=TYPES, identity=IDENTITY, **kwargs)


def _errors(params_section: dict[str, Any], **kwargs: Any) -> list[str]:
    with pytest.raises(TemplateInvalid) as caught:
        _stack(params_section, **kwargs)
    return [str(e) for e in caught.value.errors]


@pytest.mark.parametrize(
    ("ptype", "value", "expected"),
    [
        (ParamType.STRING, "x", "x"),
        (ParamType.STRING, 5, "5"),
        (ParamType.STRING, True, "true"),
        (ParamType.NUMBER, "5", 5),
        (ParamType.NUMBER, "0.5", 0.5),
        (ParamType.NUMBER, 7, 7),
        (ParamType.BOOLEAN, "yes", True),
        (ParamType.BOOLEAN, "Off", False),
        (ParamType.BOOLEAN, "1", True),
        (ParamType.BOOLEAN, False, False),
        (ParamType.COMMA_DELIMITED_LIST, "one, two", ["one", " two"]),
        (ParamType.COMMA_DELIMITED_LIST, "", []),
        (ParamType.COMMA_DELIMITED_LIST, ["a", 1], ["a", "1"]),
        (ParamType.JSON, '{"a": 1}', {"a": 1}),
        (ParamType.JSON, [1, 2], [1, 2]),
        (ParamType.JSON, "", {}),
    ],
)
def test_values_are_coerced_like_heat(ptype: ParamType, value: Any, expected: Any) -> None:
    assert coerce(ptype, value) == expected


@pytest.mark.parametrize(
    ("ptype", "value"),
    [
        (ParamType.NUMBER, "ten"),
        (ParamType.NUMBER, True),
        (ParamType.NUMBER, "nan"),
        (ParamType.BOOLEAN, "maybe"),
        (ParamType.JSON, "[1"),
        (ParamType.JSON, "5"),
        (ParamType.STRING, {"a": 1}),
        (ParamType.COMMA_DELIMITED_LIST, 5),
    ],
)
def test_bad_values_are_refused(ptype: ParamType, value: Any) -> None:
    with pytest.raises(ValueError, match=r"."):
        coerce(ptype, value)


def test_precedence_request_env_defaults_template() -> None:
    section = {name: {"type": "string", "default": "template"} for name in "abcd"}
    stack = _stack(
        section,
        parameters={"a": "request"},
        environment={
            "parameters": {"a": "env", "b": "env"},
            "parameter_defaults": {"a": "pd", "b": "pd", "c": "pd"},
        },
    )
    assert stack.parameters == {"a": "request", "b": "env", "c": "pd", "d": "template"}


def test_parameter_defaults_may_name_parameters_the_template_lacks() -> None:
    stack = _stack({}, environment={"parameter_defaults": {"other": 1}})
    assert stack.parameters == {}


def test_unknown_request_and_env_parameters_are_errors() -> None:
    errors = _errors({}, parameters={"x": 1}, environment={"parameters": {"y": 2}})
    assert errors == [
        "parameters.x: parameter 'x' is not defined in the template",
        "environment.parameters.y: parameter 'y' is not defined in the template",
    ]


def test_missing_value_is_an_error() -> None:
    assert _errors({"key": {"type": "string"}}) == [
        "parameters.key: parameter 'key' has no value and no default"
    ]


CONSTRAINTS: list[tuple[str, dict[str, Any], Any, str | None]] = [
    ("string", {"length": {"min": 2, "max": 3}}, "ab", None),
    ("string", {"length": {"min": 2, "max": 3}}, "abcd", "length must be between 2 and 3 characters (is 4)"),
    ("string", {"length": {"min": 2}}, "a", "length must be at least 2 characters (is 1)"),
    ("comma_delimited_list", {"length": {"max": 1}}, "a,b", "length must be at most 1 items (is 2)"),
    ("json", {"length": {"max": 1}}, {"a": 1, "b": 2}, "length must be at most 1 items (is 2)"),
    ("number", {"range": {"min": 1, "max": 5}}, 3, None),
    ("number", {"range": {"min": 1, "max": 5}}, 6, "6 is not between 1 and 5"),
    ("number", {"range": {"max": 5}}, "7", "7 is not at most 5"),
    ("number", {"modulo": {"step": 2, "offset": 1}}, 3, None),
    ("number", {"modulo": {"step": 2, "offset": 1}}, 4, "4 is not 1 more than a multiple of 2"),
    ("string", {"allowed_values": ["a", "b"]}, "b", None),
    ("string", {"allowed_values": ["a", "b"]}, "c", '"c" is not an allowed value ["a", "b"]'),
    ("number", {"allowed_values": [1, 2]}, "2", None),
    ("comma_delimited_list", {"allowed_values": ["a", "b"]}, "a,c", '"c" is not an allowed value ["a", "b"]'),
    ("boolean", {"allowed_values": [True]}, "yes", None),
    ("string", {"allowed_pattern": "[a-z]+"}, "abc", None),
    ("string", {"allowed_pattern": "[a-z]+"}, "abc1", '"abc1" does not match pattern "[a-z]+"'),
    ("string", {"allowed_pattern": "[a-z]+", "description": "lower case only"}, "A", "lower case only"),
]


@pytest.mark.parametrize(("ptype", "constraint", "value", "problem"), CONSTRAINTS)
def test_constraints(ptype: str, constraint: dict[str, Any], value: Any, problem: str | None) -> None:
    section = {"p": {"type": ptype, "constraints": [constraint]}}
    if problem is None:
        _stack(section, parameters={"p": value})
    else:
        assert _errors(section, parameters={"p": value}) == [f"parameters.p: {problem}"]


def test_default_must_satisfy_constraints() -> None:
    errors = _errors({"p": {"type": "number", "default": 50, "constraints": [{"range": {"max": 10}}]}})
    assert errors == ["parameters.p.default: 50 is not at most 10"]


@pytest.mark.parametrize(
    ("ptype", "constraint", "fragment"),
    [
        ("number", {"length": {"min": 1}}, "length constraint does not apply to a number parameter"),
        ("string", {"range": {"min": 1}}, "range constraint does not apply to a string parameter"),
        ("string", {"length": {"min": 3, "max": 1}}, "min must not be greater than max"),
        ("string", {"length": {}}, "must be a map with 'min' and/or 'max'"),
        ("string", {"allowed_pattern": "("}, "invalid regular expression"),
        ("string", {"allowed_values": []}, "must be a non-empty list"),
        ("number", {"modulo": {"step": 0, "offset": 0}}, "step must be non-zero"),
        ("string", {"lenght": {"min": 1}}, "a constraint must have exactly one of"),
    ],
)
def test_bad_constraint_definitions(ptype: str, constraint: dict[str, Any], fragment: str) -> None:
    errors = _errors({"p": {"type": ptype, "default": "1", "constraints": [constraint]}})
    assert any(fragment in e and e.startswith("parameters.p.constraints[0]") for e in errors), errors


def test_a_custom_constraint_of_a_service_converge_lacks_is_accepted_unchecked() -> None:
    section = {
        "net": {"type": "string", "default": "n", "constraints": [{"custom_constraint": "neutron.network"}]}
    }
    stack = _stack(section)
    assert stack.parameters == {"net": "n"}
    assert [(u.parameter, u.constraint) for u in stack.unchecked] == [("net", "neutron.network")]


def test_bad_parameter_definitions_are_all_reported() -> None:
    errors = _errors(
        {
            "a": {"type": "text"},
            "b": {"default": 1},
            "c": "string",
            "d": {"type": "string", "hidden": "perhaps", "colour": "red"},
        }
    )
    assert errors == [
        "parameters.a.type: invalid type 'text' "
        "(one of: string, number, json, comma_delimited_list, boolean)",
        "parameters.b: missing 'type'",
        "parameters.c: each parameter must be a map with at least a 'type'",
        "parameters.d.colour: unknown parameter attribute 'colour'",
        "parameters.d.hidden: must be a boolean",
    ]


def test_hidden_and_immutable_flags_are_kept() -> None:
    stack = _stack({"pw": {"type": "string", "default": "x", "hidden": True, "immutable": "true"}})
    schema = stack.template.parameters["pw"]
    assert schema.hidden
    assert schema.immutable
    assert stack.hidden_parameters() == {"pw"}


def test_immutable_parameter_changes_are_found() -> None:
    section = {"zone": {"type": "string", "immutable": True}, "size": {"type": "number", "default": 1}}
    old = _stack(section, parameters={"zone": "a"})
    assert _stack(section, parameters={"zone": "a", "size": 2}).immutable_violations(old) == []
    assert _stack(section, parameters={"zone": "b"}).immutable_violations(old) == ["zone"]
