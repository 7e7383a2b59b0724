"""Every HOT version string and release name is accepted with its own function set.

Real: `parse_template`, `load_stack` and the version tables.
"""

from __future__ import annotations

import pytest

from services.engine.template import TemplateInvalid, load_stack, parse_template
from services.engine.template.versions import VERSIONS

from .helpers import IDENTITY, TYPES

ALL = [
    ("2013-05-23", "2013-05-23"),
    ("2014-10-16", "2014-10-16"),
    ("2015-04-30", "2015-04-30"),
    ("2015-10-15", "2015-10-15"),
    ("2016-04-08", "2016-04-08"),
    ("2016-10-14", "2016-10-14"),
    ("newton", "2016-10-14"),
    ("2017-02-24", "2017-02-24"),
    ("ocata", "2017-02-24"),
    ("2017-09-01", "2017-09-01"),
    ("pike", "2017-09-01"),
    ("2018-03-02", "2018-03-02"),
    ("queens", "2018-03-02"),
    ("2018-08-31", "2018-08-31"),
    ("rocky", "2018-08-31"),
    ("2021-04-16", "2021-04-16"),
    ("wallaby", "2021-04-16"),
]


@pytest.mark.parametrize(("written", "date"), ALL)
def test_version_is_accepted(written: str, date: str) -> None:
    template = parse_template(f"heat_template_version: {written}\nresources: {{}}\n")
    assert template.version.date == date


def test_every_known_version_is_listed() -> None:
    assert set(VERSIONS) == {w for w, _ in ALL}


# function -> first version allowing it (outside conditions)
FIRST = {
    "get_attr": "2013-05-23",
    "list_join": "2013-05-23",
    "digest": "2015-04-30",
    "repeat": "2015-04-30",
    "str_split": "2015-10-15",
    "map_merge": "2016-04-08",
    "if": "2016-10-14",
    "map_replace": "2016-10-14",
    "filter": "2017-02-24",
    "str_replace_strict": "2017-02-24",
    "list_concat": "2017-09-01",
    "list_concat_unique": "2017-09-01",
    "contains": "2017-09-01",
    "make_url": "2017-09-01",
    "str_replace_vstrict": "2017-09-01",
}


@pytest.mark.parametrize(("function", "first"), sorted(FIRST.items()))
def test_function_sets_per_version(function: str, first: str) -> None:
    for written, date in ALL:
        allowed = function in VERSIONS[written].functions
        assert allowed == (date >= first), (function, written)


def test_cfn_functions_only_in_old_versions() -> None:
    assert "Fn::Join" in VERSIONS["2013-05-23"].functions
    assert "Fn::Join" not in VERSIONS["2014-10-16"].functions
    assert "Fn::Select" in VERSIONS["2015-04-30"].functions
    assert "Fn::Select" not in VERSIONS["2015-10-15"].functions


def test_condition_functions_per_version() -> None:
    assert VERSIONS["2016-04-08"].condition_functions == frozenset()
    assert VERSIONS["newton"].condition_functions == {"get_param", "equals", "not", "and", "or"}
    assert "contains" in VERSIONS["pike"].condition_functions
    assert "if" not in VERSIONS["rocky"].condition_functions
    assert "if" in VERSIONS["wallaby"].condition_functions


def test_conditions_section_needs_newton() -> None:
    with pytest.raises(TemplateInvalid, match="conditions section needs version 2016-10-14"):
        parse_template("heat_template_version: 2016-04-08\nconditions: {a: true}\n")


def test_condition_keyword_needs_newton() -> None:
    text = "heat_template_version: 2016-04-08\nresources:\n  r: {type: OS::Heat::None, condition: true}\n"
    with pytest.raises(TemplateInvalid, match="'condition' is not a valid keyword"):
        parse_template(text)


def test_contains_in_conditions_needs_pike() -> None:
    text = """
heat_template_version: 2017-02-24
conditions:
  c: {contains: [a, [a]]}
"""
    with pytest.raises(TemplateInvalid, match="'contains' is not allowed in a condition"):
        load_stack(text, types=TYPES, identity=IDENTITY)


def test_if_in_conditions_needs_wallaby() -> None:
    text = "heat_template_version: {v}\nconditions:\n  c: {{if: [true, true, false]}}\n"
    with pytest.raises(TemplateInvalid, match="'if' is not allowed in a condition"):
        load_stack(text.format(v="rocky"), types=TYPES, identity=IDENTITY)
    assert load_stack(text.format(v="wallaby"), types=TYPES, identity=IDENTITY).conditions == {"c": True}


def test_lowercase_deletion_policy_needs_newton() -> None:
    text = "heat_template_version: {v}\nresources:\n  r: {{type: OS::Heat::None, deletion_policy: retain}}\n"
    load_stack(text.format(v="newton"), types=TYPES, identity=IDENTITY)
    with pytest.raises(TemplateInvalid, match="invalid deletion policy 'retain'"):
        load_stack(text.format(v="2016-04-08"), types=TYPES, identity=IDENTITY)


def test_modulo_needs_ocata_and_tags_need_queens() -> None:
    modulo = (
        "heat_template_version: {v}\n"
        "parameters:\n  p: {{type: number, constraints: [{{modulo: {{step: 2, offset: 1}}}}]}}\n"
    )
    parse_template(modulo.format(v="ocata"))
    with pytest.raises(TemplateInvalid, match="exactly one of"):
        parse_template(modulo.format(v="newton"))
    tags = "heat_template_version: {v}\nparameters:\n  p: {{type: string, tags: [a]}}\n"
    parse_template(tags.format(v="queens"))
    with pytest.raises(TemplateInvalid, match="unknown parameter attribute 'tags'"):
        parse_template(tags.format(v="pike"))
