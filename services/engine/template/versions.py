"""HOT versions: which functions and features each `heat_template_version` allows.

Looked up once per template by `template.parse_template`; the compiler asks
the resulting `TemplateVersion` whether a function may be used, and the
parameter/resource parsers ask it which keys exist. The tables follow Heat's
per-version function sets (heat/engine/hot/template.py, hot_spec.rst):

- 2013-05-23: get_attr, get_file, get_param, get_resource, list_join,
  str_replace, resource_facade and the CFN functions (Fn::Join, Fn::Select,
  Fn::Split, Fn::Replace, Fn::Base64, Fn::GetAZs, Fn::MemberListToMap,
  Fn::ResourceFacade, Ref);
- 2014-10-16: drops the CFN functions except Fn::Select;
- 2015-04-30: + repeat, digest;
- 2015-10-15: - Fn::Select; + str_split; `get_attr: [R]` (all attributes);
  list_join of several lists; str_replace serialises maps/lists as JSON;
- 2016-04-08: + map_merge;
- 2016-10-14 (newton): + if, map_replace, yaql; the `conditions` section;
  condition functions equals, get_param, not, and, or; resource
  `condition`/`external_id`; output `condition`; lower-case deletion policies;
  repeat over a map's keys;
- 2017-02-24 (ocata): + filter, str_replace_strict; `modulo` constraint;
- 2017-09-01 (pike): + make_url, list_concat, list_concat_unique,
  str_replace_vstrict, contains (also a condition function, like yaql);
  repeat `permutations`;
- 2018-03-02 (queens): parameter `tags`;
- 2018-08-31 (rocky): as queens;
- 2021-04-16 (wallaby): `if` in conditions; `if` without a false value
  drops the enclosing item when false.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Functions this implementation cannot evaluate. Using one is a validation
#: error saying so (never a silent pass-through).
UNSUPPORTED_FUNCTIONS: dict[str, str] = {
    "Fn::GetAZs": "Fn::GetAZs is not supported (Converge has no availability zones)",
    "Fn::MemberListToMap": "Fn::MemberListToMap is not supported",
}

_CFN_2013 = frozenset(
    {
        "Fn::Base64",
        "Fn::GetAZs",
        "Fn::Join",
        "Fn::MemberListToMap",
        "Fn::Replace",
        "Fn::ResourceFacade",
        "Fn::Select",
        "Fn::Split",
        "Ref",
    }
)
_HOT_2013 = frozenset(
    {"get_attr", "get_file", "get_param", "get_resource", "list_join", "resource_facade", "str_replace"}
)
_F_20130523 = _HOT_2013 | _CFN_2013
_F_20141016 = _HOT_2013 | {"Fn::Select"}
_F_20150430 = _F_20141016 | {"repeat", "digest"}
_F_20151015 = (_F_20150430 - {"Fn::Select"}) | {"str_split"}
_F_20160408 = _F_20151015 | {"map_merge"}
_F_20161014 = _F_20160408 | {"if", "map_replace", "yaql"}
_F_20170224 = _F_20161014 | {"filter", "str_replace_strict"}
_F_20170901 = _F_20170224 | {
    "make_url",
    "list_concat",
    "list_concat_unique",
    "str_replace_vstrict",
    "contains",
}

_C_20161014 = frozenset({"get_param", "equals", "not", "and", "or"})
_C_20170901 = _C_20161014 | {"contains", "yaql"}
_C_20210416 = _C_20170901 | {"if"}

#: Every function name known in any version (regular or condition). A
#: single-key map using one of these where it is not allowed is an error,
#: not data.
CONDITION_ONLY = frozenset({"equals", "not", "and", "or"})


@dataclass(frozen=True)
class TemplateVersion:
    """What one `heat_template_version` allows."""

    date: str
    alias: str | None
    functions: frozenset[str]
    condition_functions: frozenset[str]

    @property
    def has_conditions(self) -> bool:
        """`conditions` section, resource/output `condition`, `external_id`."""
        return self.date >= "2016-10-14"

    @property
    def get_attr_all(self) -> bool:
        """`get_attr: [R]` returns all attributes."""
        return self.date >= "2015-10-15"

    @property
    def list_join_multiple(self) -> bool:
        return self.date >= "2015-10-15"

    @property
    def str_replace_json(self) -> bool:
        """str_replace serialises map/list values as JSON (else an error)."""
        return self.date >= "2015-10-15"

    @property
    def repeat_over_map(self) -> bool:
        return self.date >= "2016-10-14"

    @property
    def repeat_permutations(self) -> bool:
        return self.date >= "2017-09-01"

    @property
    def modulo_constraint(self) -> bool:
        return self.date >= "2017-02-24"

    @property
    def parameter_tags(self) -> bool:
        return self.date >= "2018-03-02"

    @property
    def lowercase_deletion_policy(self) -> bool:
        return self.date >= "2016-10-14"

    @property
    def if_nullable(self) -> bool:
        """`if` may omit the false value; a false `if` then drops its item."""
        return self.date >= "2021-04-16"


_VERSIONS = (
    TemplateVersion("2013-05-23", None, _F_20130523, frozenset()),
    TemplateVersion("2014-10-16", None, _F_20141016, frozenset()),
    TemplateVersion("2015-04-30", None, _F_20150430, frozenset()),
    TemplateVersion("2015-10-15", None, _F_20151015, frozenset()),
    TemplateVersion("2016-04-08", None, _F_20160408, frozenset()),
    TemplateVersion("2016-10-14", "newton", _F_20161014, _C_20161014),
    TemplateVersion("2017-02-24", "ocata", _F_20170224, _C_20161014),
    TemplateVersion("2017-09-01", "pike", _F_20170901, _C_20170901),
    TemplateVersion("2018-03-02", "queens", _F_20170901, _C_20170901),
    TemplateVersion("2018-08-31", "rocky", _F_20170901, _C_20170901),
    TemplateVersion("2021-04-16", "wallaby", _F_20170901, _C_20210416),
)

VERSIONS: dict[str, TemplateVersion] = {v.date: v for v in _VERSIONS} | {
    v.alias: v for v in _VERSIONS if v.alias
}

ALL_FUNCTIONS: frozenset[str] = frozenset().union(*(v.functions | v.condition_functions for v in _VERSIONS))


def first_version_with(function: str) -> str | None:
    """The earliest version allowing `function` outside conditions, if any."""
    for version in _VERSIONS:
        if function in version.functions:
            return version.date
    return None


def last_version_with(function: str) -> str | None:
    found = None
    for version in _VERSIONS:
        if function in version.functions:
            found = version.date
    return found


def lookup(value: object) -> TemplateVersion | None:
    """The version named by `value` (a date string or a release name)."""
    if isinstance(value, str):
        return VERSIONS.get(value)
    return None


def known_versions() -> list[str]:
    return [v.date + (f" ({v.alias})" if v.alias else "") for v in _VERSIONS]
