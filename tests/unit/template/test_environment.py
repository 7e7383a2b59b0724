"""Environments: sections, registry aliases and wildcards, template resources.

Real: `parse_environment` and `load_stack` with the declaration-only test types.
"""

from __future__ import annotations

import pytest

from services.engine.template import TemplateInvalid, load_stack, parse_environment

from .helpers import IDENTITY, TYPES

TEMPLATE = """
heat_template_version: 2018-08-31
resources:
  r:
    type: My::Thing
"""
NESTED = (
    "heat_template_version: 2018-08-31\n"
    "parameters:\n  size: {type: number, default: 1}\n"
    "outputs:\n  o: {value: 1}\n"
)


def test_sections_are_read_and_extras_ignored() -> None:
    env = parse_environment(
        """
parameters: {a: 1}
parameter_defaults: {b: 2}
resource_registry:
  My::Thing: OS::Heat::None
  "Old::*": "OS::Heat::*"
  resources:
    special:
      My::Thing: OS::Heat::TestResource
      hooks: pre-create
event_sinks: [{type: zaqar-queue, target: q}]
encrypted_param_names: [a]
"""
    )
    assert env.parameters == {"a": 1}
    assert env.parameter_defaults == {"b": 2}
    assert env.resolve_type("My::Thing") == "OS::Heat::None"
    assert env.resolve_type("My::Thing", "special") == "OS::Heat::TestResource"
    assert env.resolve_type("Old::Value") == "OS::Heat::Value"
    assert env.resolve_type("OS::Heat::Value") == "OS::Heat::Value"
    assert env.as_dict()["resource_registry"]["Old::*"] == "OS::Heat::*"


def test_alias_chains_and_loops() -> None:
    env = parse_environment({"resource_registry": {"A": "B", "B": "OS::Heat::None", "X": "Y", "Y": "X"}})
    assert env.resolve_type("A") == "OS::Heat::None"
    with pytest.raises(ValueError, match="mapping loop: X -> Y -> X"):
        env.resolve_type("X")


def test_environment_errors_are_reported_together() -> None:
    with pytest.raises(TemplateInvalid) as caught:
        parse_environment(
            {
                "paramters": {},
                "parameters": [1],
                "resource_registry": {"A": 5, "B::*": "C", "resources": {"r": "x"}},
                "encrypted_param_names": "a",
            }
        )
    assert [str(e) for e in caught.value.errors] == [
        "environment.paramters: 'paramters' is not a valid environment section",
        "environment.parameters: must be a map",
        "environment.encrypted_param_names: must be a list of parameter names",
        "environment.resource_registry.A: must map to a type name or a template file name",
        "environment.resource_registry.B::*: a wildcard mapping must map to a wildcard ('Prefix::*')",
        "environment.resource_registry.resources.r: must be a map",
    ]


def test_type_alias_is_applied_before_validation() -> None:
    stack = load_stack(
        TEMPLATE,
        environment={"resource_registry": {"My::Thing": "OS::Heat::None"}},
        types=TYPES,
        identity=IDENTITY,
    )
    assert stack.resources["r"].type == "OS::Heat::None"
    assert stack.resources["r"].template_type == "My::Thing"


def test_template_resource_file_must_exist_and_parse() -> None:
    env = {"resource_registry": {"My::Thing": "thing.yaml", "Unused::Thing": "unused.yaml"}}
    with pytest.raises(TemplateInvalid) as caught:
        load_stack(
            TEMPLATE,
            environment=env,
            files={"unused.yaml": "heat_template_version: 1999-01-01\n"},
            types=TYPES,
            identity=IDENTITY,
        )
    assert [str(e) for e in caught.value.errors] == [
        "environment.resource_registry.My::Thing: template file 'thing.yaml' is not in the request's files",
        "files.unused.yaml.heat_template_version: unknown version '1999-01-01'; supported: "
        + ", ".join(
            [
                "2013-05-23",
                "2014-10-16",
                "2015-04-30",
                "2015-10-15",
                "2016-04-08",
                "2016-10-14 (newton)",
                "2017-02-24 (ocata)",
                "2017-09-01 (pike)",
                "2018-03-02 (queens)",
                "2018-08-31 (rocky)",
                "2021-04-16 (wallaby)",
            ]
        ),
    ]


def test_template_resource_properties_are_its_parameters() -> None:
    template = """
heat_template_version: 2018-08-31
resources:
  r:
    type: My::Thing
    properties: {size: 3, colour: red}
  user:
    type: OS::Heat::TestResource
    properties:
      value: {get_attr: [r, nope]}
"""
    env = {"resource_registry": {"My::Thing": "thing.yaml"}}
    with pytest.raises(TemplateInvalid) as caught:
        load_stack(template, environment=env, files={"thing.yaml": NESTED}, types=TYPES, identity=IDENTITY)
    assert [str(e) for e in caught.value.errors] == [
        "resources.r.properties.colour: unknown property: thing.yaml has no parameter 'colour'",
        "resources.user.properties.value.get_attr: get_attr: resource 'r' has no attribute 'nope' "
        "(its type declares: OS::stack_id, o)",
    ]


def test_unknown_type_after_mapping_names_both() -> None:
    with pytest.raises(
        TemplateInvalid, match="unknown resource type 'OS::Nova::Server' \\(mapped from 'My::Thing'\\)"
    ):
        load_stack(
            TEMPLATE,
            environment={"resource_registry": {"My::Thing": "OS::Nova::Server"}},
            types=TYPES,
            identity=IDENTITY,
        )


def test_hooks_apply_to_names_and_fnmatch_patterns_as_heat_matches_them() -> None:
    env = parse_environment(
        {
            "resource_registry": {
                "resources": {
                    "web*": {"hooks": "pre-create"},
                    "web1": {"hooks": ["pre-update", "pre-delete"]},
                    "nested": {"inner": {"hooks": "pre-create"}},
                }
            }
        }
    )
    assert env.hooks_for("web1") == {"pre-create", "pre-update", "pre-delete"}
    assert env.hooks_for("web22") == {"pre-create"}
    assert env.hooks_for("db") == frozenset()
    assert env.hooks_for("inner") == frozenset(), "a nested section is its child stack's"


def test_unknown_and_unsupported_hook_types_are_refused_with_their_path() -> None:
    with pytest.raises(TemplateInvalid) as refused:
        parse_environment(
            {
                "resource_registry": {
                    "resources": {"a": {"hooks": "post-create"}, "b": {"x": {"hooks": "pre-boot"}}}
                }
            }
        )
    text = str(refused.value)
    assert (
        "environment.resource_registry.resources.a.hooks: hook 'post-create' is not supported by Converge"
        in text
    )
    assert "environment.resource_registry.resources.b.x.hooks: invalid hook type 'pre-boot'" in text
