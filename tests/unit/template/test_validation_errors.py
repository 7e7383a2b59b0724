"""All problems in a template are reported together, each with its path.

Real: `load_stack` with the declaration-only test types (the real registry's
types are exercised in test_real_templates).
"""

from __future__ import annotations

import pytest

from services.engine.template import TemplateInvalid, load_stack
from shared.errors import InvalidInput

from .helpers import IDENTITY, TYPES

BROKEN = """
heat_template_version: 2018-08-31
description: many mistakes at once
colour: blue
parameters:
  size: {type: number, default: big}
resources:
  web:
    type: OS::Heat::TestResource
    properties:
      value: {get_param: nothing}
      wait_secs: soon
      colour: red
  db:
    type: OS::Heat::WaitCondition
    properties:
      timeout: -1
  typo:
    type: OS::Heat::TestResorce
  cache:
    type: OS::Heat::TestResource
    depends_on: [ghost]
    deletion_policy: Snapshot
    properties:
      value: {get_attr: [web, nope]}
  broken: "just a string"
  notype:
    properties: {}
outputs:
  out:
    value: {get_resource: missing}
  no_value:
    description: forgot the value
"""


def test_every_error_is_reported_with_its_path() -> None:
    with pytest.raises(TemplateInvalid) as caught:
        load_stack(BROKEN, types=TYPES, identity=IDENTITY)
    errors = caught.value.errors
    assert [str(e) for e in errors] == [
        "colour: 'colour' is not a valid template section",
        "parameters.size.default: value 'big' is not a number (parameter 'size' is a number)",
        "resources.broken: each resource must be a map with at least a 'type'",
        "resources.notype.type: missing or not a string: every resource needs a type",
        "outputs.no_value: each output must be a map with a 'value'",
        "resources.typo.type: unknown resource type 'OS::Heat::TestResorce'; did you mean "
        "OS::Heat::TestResource?",
        "resources.web.properties.value.get_param: get_param: unknown parameter 'nothing'",
        "resources.web.properties.colour: unknown property for type OS::Heat::TestResource (known: "
        "action_wait_secs, attr_wait_secs, client_name, constraint_prop_secs, entity_name, fail, "
        "update_replace, update_replace_value, value, wait_secs)",
        "resources.web.properties.wait_secs: Input should be a valid number, "
        "unable to parse string as a number",
        "resources.db.properties.handle: required property missing (type OS::Heat::WaitCondition)",
        "resources.db.properties.timeout: Input should be greater than or equal to 1",
        "resources.cache.properties.value.get_attr: get_attr: resource 'web' has no attribute 'nope' "
        "(its type declares: output)",
        "resources.cache.depends_on: unknown resource 'ghost'",
        'resources.cache.deletion_policy: "Snapshot" deletion policy not supported by '
        "OS::Heat::TestResource (it takes no snapshots); use Delete or Retain",
        "outputs.out.value.get_resource: get_resource: unknown resource 'missing'",
    ]
    assert isinstance(caught.value, InvalidInput)
    assert caught.value.path == "colour"
    assert str(caught.value).startswith("template is invalid (15 errors): colour: ")
    assert "... and 10 more" in str(caught.value)


def test_unresolved_values_are_not_type_checked() -> None:
    template = """
heat_template_version: 2018-08-31
resources:
  src: {type: OS::Heat::TestResource}
  dst:
    type: OS::Heat::WaitCondition
    properties:
      handle: {get_resource: src}
      timeout: {get_attr: [src, output]}
"""
    stack = load_stack(template, types=TYPES, identity=IDENTITY)
    assert stack.requires("dst") == {"src"}


def test_any_attribute_types_accept_every_attribute() -> None:
    template = """
heat_template_version: 2018-08-31
resources:
  any: {type: OS::Heat::None, properties: {whatever: 1}}
  user:
    type: OS::Heat::TestResource
    properties:
      value: {get_attr: [any, some, deep, path]}
"""
    assert load_stack(template, types=TYPES, identity=IDENTITY).requires("user") == {"any"}


def test_resource_keyword_and_name_errors() -> None:
    template = """
heat_template_version: 2018-08-31
resources:
  a/b: {type: OS::Heat::None}
  c:
    type: OS::Heat::None
    depends: a
    external_id: x
    depends_on: d
  d:
    type: OS::Heat::None
    update_policy: [1]
    metadata: 5
"""
    with pytest.raises(TemplateInvalid) as caught:
        load_stack(template, types=TYPES, identity=IDENTITY)
    assert [str(e) for e in caught.value.errors] == [
        "resources.a/b: a resource name must be non-empty and must not contain '/'",
        "resources.c.depends: 'depends' is not a valid keyword inside a resource definition",
        "resources.c.depends_on: a resource with an external_id cannot have depends_on",
        "resources.d.metadata: must be a map",
        "resources.d.update_policy: must be a map",
    ]


def test_parameter_group_errors() -> None:
    template = """
heat_template_version: 2018-08-31
parameters:
  a: {type: string, default: x}
parameter_groups:
  - label: one
    parameters: [a, ghost]
  - label: two
    parameters: [a]
  - label: three
"""
    with pytest.raises(TemplateInvalid) as caught:
        load_stack(template, types=TYPES, identity=IDENTITY)
    assert [str(e) for e in caught.value.errors] == [
        "parameter_groups[0].parameters: 'ghost' is not a parameter of the template",
        "parameter_groups[1].parameters: parameter 'a' is already in group 0; "
        "a parameter belongs to one group only",
        "parameter_groups[2].parameters: must be a list of parameter names",
    ]
