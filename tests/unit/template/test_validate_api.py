"""`validate_response` returns Heat's validate body; parameters need no values.

Real: the template layer with the declaration-only test types.
"""

from __future__ import annotations

import pytest

from services.engine.template import TemplateInvalid, validate_response

from .helpers import TYPES

TEMPLATE = """
heat_template_version: 2018-03-02
description: A validated template
parameter_groups:
  - label: Server
    description: server settings
    parameters: [flavor, key]
parameters:
  flavor:
    type: string
    label: Flavor
    description: The flavor
    default: m1.small
    constraints:
      - allowed_values: [m1.small, m1.large]
        description: small or large
      - length: {min: 2, max: 20}
  key:
    type: string
    hidden: true
  count:
    type: number
    tags: [scale]
    constraints:
      - range: {min: 1, max: 9}
      - modulo: {step: 1, offset: 0}
  names:
    type: comma_delimited_list
    default: a,b
  conf:
    type: json
  debug:
    type: boolean
    constraints:
      - allowed_pattern: x
resources:
  r:
    type: OS::Heat::TestResource
    properties:
      value: {list_join: [",", [{get_param: key}, {get_param: flavor}]]}
      wait_secs: {get_param: count}
"""


def test_response_shape() -> None:
    with pytest.raises(TemplateInvalid, match="allowed_pattern constraint does not apply to a boolean"):
        validate_response(TEMPLATE, types=TYPES)
    body = validate_response(
        TEMPLATE.replace("      - allowed_pattern: x\n", "      - allowed_values: [true]\n"),
        types=TYPES,
        parameters={"count": 3},
        environment={"parameter_defaults": {"names": "x,y"}},
    )
    assert body["Description"] == "A validated template"
    assert body["ParameterGroups"] == [
        {"label": "Server", "description": "server settings", "parameters": ["flavor", "key"]}
    ]
    params = body["Parameters"]
    assert params["flavor"] == {
        "Type": "String",
        "Description": "The flavor",
        "NoEcho": "false",
        "Label": "Flavor",
        "Default": "m1.small",
        "AllowedValues": ["m1.small", "m1.large"],
        "MinLength": 2,
        "MaxLength": 20,
        "ConstraintDescription": "small or large",
    }
    assert params["key"] == {"Type": "String", "Description": "", "NoEcho": "true", "Label": "key"}
    assert params["count"] == {
        "Type": "Number",
        "Description": "",
        "NoEcho": "false",
        "Label": "count",
        "Value": 3,
        "Tags": ["scale"],
        "MinValue": 1,
        "MaxValue": 9,
        "Step": 1,
        "Offset": 0,
    }
    assert params["names"]["Type"] == "CommaDelimitedList"
    assert params["names"]["Default"] == "x,y"
    assert params["conf"]["Type"] == "Json"
    assert params["debug"] == {
        "Type": "Boolean",
        "Description": "",
        "NoEcho": "false",
        "Label": "debug",
        "AllowedValues": [True],
    }
    assert body["Environment"] == {
        "parameters": {},
        "parameter_defaults": {"names": "x,y"},
        "resource_registry": {"resources": {}},
        "event_sinks": [],
        "encrypted_param_names": [],
    }


def test_minimal_template_has_no_parameter_groups_key() -> None:
    body = validate_response("heat_template_version: 2016-10-14\nresources: {}\n", types=TYPES)
    assert body == {
        "Description": "No description",
        "Parameters": {},
        "Environment": {
            "parameters": {},
            "parameter_defaults": {},
            "resource_registry": {"resources": {}},
            "event_sinks": [],
            "encrypted_param_names": [],
        },
    }


def test_invalid_template_still_raises_with_all_errors() -> None:
    with pytest.raises(TemplateInvalid) as caught:
        validate_response(
            "heat_template_version: 2016-10-14\nresources:\n  a: {type: Nope}\n  b: {type: Nope2}\n",
            types=TYPES,
        )
    assert [e.path for e in caught.value.errors] == ["resources.a.type", "resources.b.type"]
