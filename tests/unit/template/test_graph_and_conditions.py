"""The dependency graph: edges, reverse edges, leaves, cycles named in order, conditions.

Real: `load_stack` with the declaration-only test types.
"""

from __future__ import annotations

from typing import Any

import pytest

from services.engine.template import TemplateInvalid, load_stack
from services.engine.template.graph import find_cycles

from .helpers import IDENTITY, TYPES


def _resource(value: Any = "v", **extra: Any) -> dict[str, Any]:
    return {"type": "OS::Heat::TestResource", "properties": {"value": value}, **extra}


def _load(resources: dict[str, Any], **kwargs: Any) -> Any:
    template = {"heat_template_version": "2021-04-16", "resources": resources, **kwargs}
    return load_stack(template, types=TYPES, identity=IDENTITY)


def test_edges_from_get_resource_get_attr_and_depends_on() -> None:
    stack = _load(
        {
            "a": _resource(),
            "b": _resource({"get_attr": ["a", "output"]}),
            "c": _resource({"get_resource": "a"}, depends_on="b"),
            "d": _resource(depends_on=["a", "c"]),
            "e": _resource(metadata={"ref": {"get_resource": "d"}}),
        }
    )
    assert stack.requires("a") == set()
    assert stack.requires("b") == {"a"}
    assert stack.requires("c") == {"a", "b"}
    assert stack.requires("d") == {"a", "c"}
    assert stack.requires("e") == {"d"}
    assert stack.dependents("a") == {"b", "c", "d"}
    assert stack.dependents("e") == set()
    assert stack.leaves() == {"a"}
    assert stack.roots() == {"e"}
    assert stack.resources["c"].references == {"a"}


def test_cycle_is_named_in_order() -> None:
    with pytest.raises(TemplateInvalid) as caught:
        _load(
            {
                "a": _resource({"get_attr": ["b", "output"]}),
                "b": _resource({"get_resource": "c"}),
                "c": _resource(depends_on="a"),
                "free": _resource(),
            }
        )
    assert [str(e) for e in caught.value.errors] == ["resources.a: dependency cycle: a -> b -> c -> a"]


def test_self_reference_is_a_cycle() -> None:
    with pytest.raises(TemplateInvalid, match="dependency cycle: a -> a"):
        _load({"a": _resource({"get_attr": ["a", "output"]})})


def test_several_cycles_are_all_reported() -> None:
    with pytest.raises(TemplateInvalid) as caught:
        _load(
            {
                "a": _resource(depends_on="b"),
                "b": _resource(depends_on="a"),
                "x": _resource(depends_on="y"),
                "y": _resource(depends_on="x"),
            }
        )
    assert [e.message for e in caught.value.errors] == [
        "dependency cycle: a -> b -> a",
        "dependency cycle: x -> y -> x",
    ]


def test_find_cycles_is_iterative_on_long_chains() -> None:
    n = 50_000
    requires = {f"r{i}": {f"r{i + 1}"} for i in range(n)}
    requires[f"r{n}"] = {"r0"}
    (cycle,) = find_cycles(requires)
    assert cycle[0] == cycle[-1] == "r0"
    assert len(cycle) == n + 2


def test_condition_false_removes_resource_and_ignores_depends_on() -> None:
    stack = _load(
        {"gone": _resource(condition="off"), "kept": _resource(depends_on="gone")},
        conditions={"off": False},
    )
    assert set(stack.resources) == {"kept"}
    assert stack.disabled == {"gone"}
    assert stack.requires("kept") == set()


def test_reference_to_removed_resource_is_an_error() -> None:
    with pytest.raises(TemplateInvalid) as caught:
        _load(
            {"gone": _resource(condition="off"), "user": _resource({"get_attr": ["gone", "output"]})},
            conditions={"off": False},
        )
    assert [str(e) for e in caught.value.errors] == [
        "resources.user.properties.value.get_attr: get_attr: resource 'gone' is disabled by its condition"
    ]


def test_reference_inside_unselected_if_branch_is_fine() -> None:
    stack = _load(
        {
            "gone": _resource(condition="off"),
            "user": _resource({"if": ["off", {"get_attr": ["gone", "output"]}, "fallback"]}),
        },
        conditions={"off": False},
    )
    assert stack.requires("user") == set()


def test_condition_errors() -> None:
    with pytest.raises(TemplateInvalid) as caught:
        _load(
            {"r": _resource(condition="nope")},
            conditions={
                "loop_a": "loop_b",
                "loop_b": "loop_a",
                "bad_and": {"and": ["loop_a"]},
                "bad_value": "nope",
                "not_bool": {"get_param": "OS::stack_name"},
            },
        )
    known = "bad_and, bad_value, loop_a, loop_b, not_bool"
    assert [str(e) for e in caught.value.errors] == [
        "conditions.loop_a: condition loop: loop_a -> loop_b -> loop_a",
        "conditions.bad_and.and: and: expected a list of at least two conditions",
        f"conditions.bad_value: unknown condition 'nope' (known: {known})",
        "conditions.not_bool: a condition must be true/false, a condition name or a condition function, "
        "not 'teststack'",
        f"resources.r.condition: unknown condition 'nope' (known: {known})",
    ]


def test_output_condition() -> None:
    stack = _load(
        {"a": _resource()},
        conditions={"off": False},
        outputs={"hidden": {"value": {"get_attr": ["a", "output"]}, "condition": "off"}},
    )
    assert not stack.outputs["hidden"].enabled
