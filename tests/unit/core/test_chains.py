"""OS::Heat::ResourceChain, pure: its child template (order, shared properties), the
limits on its length and its copies, and its attributes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from services.engine.core.child_attributes import Member, child_attributes
from services.engine.core.child_goals import child_goal
from services.engine.core.nesting import NestedInvalid
from services.engine.template import DEFAULT_LIMITS, Budget, BudgetExceeded, TemplateLimits

CHAIN = "OS::Heat::ResourceChain"


def goal(
    props: dict[str, object], *, limits: TemplateLimits = DEFAULT_LIMITS, budget: Budget | None = None
) -> dict[str, object]:
    made = child_goal(CHAIN, props, environment={}, files={}, timeout_mins=None, limits=limits, budget=budget)
    assert isinstance(made.template, dict)
    return dict(made.template)


def test_each_member_depends_on_the_one_before_unless_concurrent() -> None:
    ordered = goal({"resources": ["A::T", "B::T", "C::T"], "resource_properties": {"x": 1}})
    assert ordered["resources"] == {
        "0": {"type": "A::T", "properties": {"x": 1}},
        "1": {"type": "B::T", "properties": {"x": 1}, "depends_on": ["0"]},
        "2": {"type": "C::T", "properties": {"x": 1}, "depends_on": ["1"]},
    }
    together = goal({"resources": ["A::T", "B::T"], "concurrent": True})
    assert together["resources"] == {"0": {"type": "A::T"}, "1": {"type": "B::T"}}


def test_a_chain_longer_than_a_stack_may_hold_is_refused_naming_the_property() -> None:
    small = replace(DEFAULT_LIMITS, max_resources=2)
    with pytest.raises(NestedInvalid, match=r"property resources: 3 members .*max_resources 2"):
        goal({"resources": ["A::T"] * 3}, limits=small)


def test_copies_of_the_shared_properties_are_charged_before_they_are_built() -> None:
    big = {"blob": "x" * 1000}
    tight = replace(DEFAULT_LIMITS, max_evaluation_bytes=50_000)
    with pytest.raises(BudgetExceeded):
        goal({"resources": ["A::T"] * 100, "resource_properties": big}, budget=Budget(tight))


def test_an_empty_type_is_refused_naming_its_entry() -> None:
    with pytest.raises(NestedInvalid, match=r"resources: .*entry 1 is an empty resource type"):
        goal({"resources": ["A::T", " "]})


def test_its_attributes_are_its_members_in_chain_order() -> None:
    members = [Member("1", "r1", {"v": "b"}), Member("0", "r0", {"v": "a"})]
    attrs = child_attributes(CHAIN, child_id="c", child_name="n", outputs={}, members=members)
    assert attrs["refs"] == ["r0", "r1"]
    assert attrs["attributes"] == {"v": {"0": "a", "1": "b"}}
    assert attrs["v"] == ["a", "b"]
    assert attrs["resource.1"] == "r1"
    assert "removed_rsrc_list" not in attrs
