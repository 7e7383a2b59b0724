"""Documents are refused quickly and clearly when too big, too deep or alias bombs.

Real: the loader (libyaml events, our composer) and `parse_template`.
"""

from __future__ import annotations

import json
import time

import pytest

from services.engine.template import TemplateInvalid, TemplateLimits, parse_template
from services.engine.template.loader import DocumentError, load_document

LIMITS = TemplateLimits()

BILLION_LAUGHS = """\
heat_template_version: 2018-08-31
description: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
x1: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
x2: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
x3: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
x4: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
x5: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
x6: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
x7: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
x8: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
resources: {}
"""


def test_billion_laughs_is_refused_quickly() -> None:
    start = time.perf_counter()
    with pytest.raises(TemplateInvalid) as caught:
        parse_template(BILLION_LAUGHS)
    elapsed = time.perf_counter() - start
    assert "expands to more than" in str(caught.value)
    assert elapsed < 2  # generous; it takes milliseconds (expansion is never done)


def test_too_many_aliases_is_refused() -> None:
    text = "a: &x 1\nb: [" + ", ".join(["*x"] * 50) + "]\n"
    with pytest.raises(DocumentError, match="too many YAML aliases"):
        load_document(text, limits=TemplateLimits(max_yaml_aliases=10))


def test_recursive_alias_is_refused() -> None:
    with pytest.raises(DocumentError, match="recursive YAML alias"):
        load_document("a: &x [1, *x]\n", limits=LIMITS)


def test_ordinary_aliases_and_merge_keys_work() -> None:
    data = load_document("base: &b {a: 1, b: 2}\nm:\n  <<: *b\n  b: 3\nl: [*b]\n", limits=LIMITS)
    assert data == {"base": {"a": 1, "b": 2}, "m": {"a": 1, "b": 3}, "l": [{"a": 1, "b": 2}]}


def test_yaml_dates_stay_strings() -> None:
    data = load_document(
        "heat_template_version: 2015-10-15\nwhen: 2001-12-14t21:59:43.10-05:00\n", limits=LIMITS
    )
    assert data == {"heat_template_version": "2015-10-15", "when": "2001-12-14t21:59:43.10-05:00"}


def test_yaml_scalars_follow_yaml_1_1_like_heat() -> None:
    data = load_document("v: [yes, off, ~, 0x10, 1.5, '1', 010, text]\n1: a\ntrue: b\n", limits=LIMITS)
    assert data == {"v": [True, False, None, 16, 1.5, "1", 8, "text"], "1": "a", "true": "b"}


def test_json_is_accepted() -> None:
    template = parse_template(json.dumps({"heat_template_version": "2016-10-14", "resources": {}}))
    assert template.version.date == "2016-10-14"


def test_unsupported_tags_and_multiple_documents_are_refused() -> None:
    with pytest.raises(DocumentError, match="unsupported YAML tag"):
        load_document("a: !!python/object:os.system ls\n", limits=LIMITS)
    with pytest.raises(DocumentError, match="single YAML document"):
        load_document("a: 1\n---\nb: 2\n", limits=LIMITS)


def test_size_limit() -> None:
    text = "heat_template_version: 2016-10-14\ndescription: " + "x" * 2000 + "\n"
    with pytest.raises(
        TemplateInvalid, match=r"template size \(\d+ bytes\) exceeds the maximum allowed size \(1000 bytes\)"
    ):
        parse_template(text, limits=TemplateLimits(max_template_bytes=1000))
    with pytest.raises(TemplateInvalid, match="exceeds the maximum"):
        parse_template(text.encode(), limits=TemplateLimits(max_template_bytes=1000))


@pytest.mark.parametrize(
    "text", ["[" * 5000 + "]" * 5000, "a: " + "[" * 5000 + "]" * 5000, '{"a":' * 3000 + "1" + "}" * 3000]
)
def test_depth_limit(text: str) -> None:
    with pytest.raises(DocumentError, match=r"nest|JSON object"):
        load_document(text, limits=LIMITS)


def test_depth_limit_for_mappings_given_directly() -> None:
    deep: dict[str, object] = {}
    node = deep
    for _ in range(50):
        node["x"] = {}
        node = node["x"]  # type: ignore[assignment]
    with pytest.raises(DocumentError, match="nested deeper than 10"):
        load_document(deep, limits=TemplateLimits(max_depth=10))


def test_resource_count_limit() -> None:
    resources = {f"r{i}": {"type": "OS::Heat::None"} for i in range(11)}
    template = {"heat_template_version": "2016-10-14", "resources": resources}
    with pytest.raises(TemplateInvalid, match=r"too many resources \(11; the limit is 10\)"):
        parse_template(template, limits=TemplateLimits(max_resources=10))


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("- a\n- b\n", "not a JSON object or YAML mapping"),
        ("a: [\n", "not valid YAML"),
        (b"\xff\xfe", "not valid UTF-8"),
        ("description: no version\n", "heat_template_version: missing"),
        ("heat_template_version: 2012-12-12\n", "unknown version '2012-12-12'"),
        ("AWSTemplateFormatVersion: 2010-09-09\n", "CloudFormation templates are not supported"),
    ],
)
def test_unreadable_documents(text: str | bytes, fragment: str) -> None:
    with pytest.raises(TemplateInvalid) as caught:
        parse_template(text)
    assert fragment in str(caught.value)
