"""Lazy resolution of properties and outputs, and property diffs with schema defaults.

Real: the template layer; dependency data is given as `ResourceData` values,
as the convergence engine passes them when it checks a resource.
"""

from __future__ import annotations

from typing import Any

import pytest

from services.engine.template import (
    OutputValue,
    PropertyDiff,
    ResolutionError,
    ResourceData,
    diff_properties,
    load_stack,
    resolve_outputs,
    resolve_properties,
)
from shared.plugins.base import UpdateRule, update_rule
from shared.plugins.builtin.placeholders import AnyProperties

from .helpers import IDENTITY, TYPES, ProbeProps, RandomStringProps

TEMPLATE = """
heat_template_version: 2018-08-31
resources:
  a:
    type: OS::Heat::TestResource
    properties:
      value: static
  b:
    type: OS::Heat::TestResource
    properties:
      value: {list_join: ["-", [{get_attr: [a, output]}, {get_resource: a}]]}
      fail: null
outputs:
  from_b:
    description: b's output
    value: {get_attr: [b, output]}
  static:
    value: [1, 2]
  broken:
    value: {list_join: [",", {get_attr: [a, output]}]}
"""


def _stack() -> Any:
    return load_stack(TEMPLATE, types=TYPES, identity=IDENTITY)


def test_properties_resolve_from_dependency_data_and_drop_nulls() -> None:
    stack = _stack()
    assert resolve_properties(stack, "a", {}) == {"value": "static"}
    data = {"a": ResourceData("a-phys", {"output": "out"})}
    assert resolve_properties(stack, "b", data) == {"value": "out-a-phys"}


def test_resolved_values_are_fresh_copies() -> None:
    stack = load_stack(
        "heat_template_version: 2018-08-31\n"
        "resources:\n  v: {type: OS::Heat::Value, properties: {value: [1, [2]]}}\n",
        types=TYPES,
        identity=IDENTITY,
    )
    first = resolve_properties(stack, "v", {})
    first["value"][1].append(3)
    assert resolve_properties(stack, "v", {}) == {"value": [1, [2]]}


def test_outputs_resolve_or_carry_an_error() -> None:
    stack = _stack()
    outputs = resolve_outputs(stack, {"a": ResourceData("a-phys", {"output": "out"})})
    assert outputs["from_b"] == OutputValue(None, "b's output", "Resource b is not available")
    assert outputs["static"] == OutputValue([1, 2])
    assert outputs["broken"].value is None
    assert outputs["broken"].error is not None
    assert "list_join" in outputs["broken"].error
    assert "outputs.broken.value.list_join" in outputs["broken"].error

    failed = resolve_outputs(
        stack,
        {"a": ResourceData("a-phys", {"output": "out"}), "b": ResourceData(None, {}, error="boom")},
    )
    assert failed["from_b"] == OutputValue(None, "b's output", "Resource b failed: boom")
    done = resolve_outputs(
        stack, {"a": ResourceData("a-phys", {"output": "o"}), "b": ResourceData("b", {"output": "fine"})}
    )
    assert done["from_b"] == OutputValue("fine", "b's output")


def test_missing_data_raises_resolution_error_with_path() -> None:
    with pytest.raises(ResolutionError) as caught:
        resolve_properties(_stack(), "b", {})
    assert caught.value.path == "resources.b.properties.value.list_join[1][0].get_attr"


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ({}, {}, PropertyDiff(frozenset(), False)),
        ({}, {"value": ""}, PropertyDiff(frozenset(), False)),  # omitted == default
        ({"value": ""}, {"value": None}, PropertyDiff(frozenset(), False)),  # null == omitted
        ({"value": "a"}, {"value": "b"}, PropertyDiff(frozenset({"value"}), False)),
        (
            {"update_replace": False},
            {"update_replace": True},
            PropertyDiff(frozenset({"update_replace"}), True),
        ),
        (
            {"value": "a", "update_replace_value": "x"},
            {"value": "b", "update_replace_value": "y"},
            PropertyDiff(frozenset({"value", "update_replace_value"}), True),
        ),
        ({"wait_secs": 1}, {"wait_secs": 1.0}, PropertyDiff(frozenset(), False)),
        ({"fail": False}, {"fail": 0}, PropertyDiff(frozenset({"fail"}), False)),
        ({"unknown": 1}, {}, PropertyDiff(frozenset({"unknown"}), True)),
    ],
)
def test_diff_properties(old: dict[str, Any], new: dict[str, Any], expected: PropertyDiff) -> None:
    assert diff_properties(ProbeProps, old, new) == expected


def test_a_property_a_schema_accepts_undeclared_changes_in_place() -> None:
    changed = diff_properties(AnyProperties, {"value": "a", "size": 1}, {"value": "b", "size": 1})
    assert changed == PropertyDiff(frozenset({"value"}), False)
    assert update_rule(AnyProperties, "anything") is UpdateRule.IN_PLACE
    assert update_rule(ProbeProps, "unknown") is UpdateRule.REPLACE  # one it would refuse


def test_diff_uses_default_factories_and_nested_values() -> None:
    assert diff_properties(RandomStringProps, {"length": 32}, {}).unchanged
    changed = diff_properties(
        RandomStringProps, {"character_classes": [{"a": 1}]}, {"character_classes": [{"a": 2}]}
    )
    assert changed.changed == {"character_classes"}
    assert not changed.replace
    assert diff_properties(RandomStringProps, {}, {"length": 8}).replace
