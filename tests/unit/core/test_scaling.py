"""Autoscaling decisions, pure: Heat's adjustment types and min_adjustment_step, the
bounds, cooldowns, the size a group keeps through an update, which members a resize
keeps (failed, then oldest removed first) and what a policy's signal decides."""

from __future__ import annotations

import pytest

from services.engine.core.child_goals import scaling_template
from services.engine.core.nesting import ScalingState
from services.engine.core.scaling import (
    AdjustmentType,
    Cooldown,
    Group,
    Policy,
    ScalingInvalid,
    alarm_state,
    check_sizes,
    cooldown_after,
    cooldown_refusal,
    decide_signal,
    initial_size,
    new_capacity,
    plan_members,
    size_after_update,
)
from services.engine.template import DEFAULT_LIMITS, Budget
from shared.plugins.builtin.nested import AutoScalingGroupProperties


def test_change_and_exact_capacity_stay_within_min_and_max() -> None:
    assert new_capacity(2, 2, "change_in_capacity", minimum=1, maximum=5) == 4
    assert new_capacity(4, -1, "change_in_capacity", minimum=1, maximum=5) == 3
    assert new_capacity(4, 3, "change_in_capacity", minimum=1, maximum=5) == 5
    assert new_capacity(2, -5, "change_in_capacity", minimum=1, maximum=5) == 1
    assert new_capacity(2, 4, "exact_capacity", minimum=1, maximum=5) == 4
    assert new_capacity(2, 9, "exact_capacity", minimum=1, maximum=5) == 5
    assert new_capacity(2, 0, "exact_capacity", minimum=1, maximum=5) == 1


def test_percent_change_rounds_small_changes_away_from_zero_and_large_ones_towards_it() -> None:
    assert new_capacity(10, 15, "percent_change_in_capacity", minimum=0, maximum=100) == 11  # 1.5 -> 1
    assert new_capacity(10, -15, "percent_change_in_capacity", minimum=0, maximum=100) == 9
    assert new_capacity(3, 10, "percent_change_in_capacity", minimum=0, maximum=100) == 4  # 0.3 -> 1
    assert new_capacity(3, -10, "percent_change_in_capacity", minimum=0, maximum=100) == 2
    assert new_capacity(10, 50, "percent_change_in_capacity", minimum=0, maximum=12) == 12


def test_min_adjustment_step_raises_a_small_percent_change_and_only_that() -> None:
    pct: AdjustmentType = "percent_change_in_capacity"
    assert new_capacity(10, 10, pct, minimum=0, maximum=100, min_adjustment_step=3) == 13
    assert new_capacity(10, -10, pct, minimum=0, maximum=100, min_adjustment_step=3) == 7
    assert new_capacity(10, 50, pct, minimum=0, maximum=100, min_adjustment_step=3) == 15
    assert new_capacity(10, 1, "change_in_capacity", minimum=0, maximum=100, min_adjustment_step=3) == 11


def test_an_unknown_adjustment_type_is_refused_naming_it() -> None:
    with pytest.raises(ScalingInvalid, match="adjustment_type: 'double'"):
        new_capacity(1, 2, "double", minimum=0, maximum=5)  # type: ignore[arg-type]


def test_sizes_are_checked_as_heat_does() -> None:
    assert check_sizes(1, 5, 3) is None
    assert check_sizes(1, 5, None) is None
    assert check_sizes(-1, 5, None) == "min_size: the size of an AutoScalingGroup can not be less than zero"
    assert check_sizes(6, 5, None) == "min_size: min_size can not be greater than max_size"
    assert check_sizes(1, 5, 6) == "desired_capacity: desired_capacity must be between min_size and max_size"


def test_a_cooldown_refuses_until_it_ends_and_only_a_size_change_starts_one() -> None:
    assert cooldown_refusal("up", None, now=100) is None
    running = cooldown_after(None, cooldown=60, now=100, reason="change_in_capacity : 1", size_changed=True)
    assert running == Cooldown(160, "change_in_capacity : 1")
    refusal = cooldown_refusal("up", running, now=130)
    assert refusal is not None
    assert "due to cooldown, 30s left" in refusal
    assert cooldown_refusal("up", running, now=160) is None
    assert cooldown_after(running, cooldown=60, now=200, reason="x", size_changed=False) == running
    assert cooldown_after(running, cooldown=10, now=120, reason="x", size_changed=True) == Cooldown(160, "x")
    assert cooldown_after(None, cooldown=None, now=5, reason="x", size_changed=True) == Cooldown(5, "x")
    assert Cooldown.from_dict(running.as_dict()) == running
    assert Cooldown.from_dict({"ends_at": "soon"}) is None
    assert Cooldown.from_dict(None) is None


def test_an_update_keeps_the_scaled_size_unless_desired_capacity_changes() -> None:
    assert initial_size(1, None) == 1
    assert initial_size(1, 2) == 2
    assert size_after_update(None, old_desired=None, new_desired=2, min_size=1, max_size=5) == 2
    assert size_after_update(4, old_desired=2, new_desired=2, min_size=1, max_size=5) == 4
    assert size_after_update(4, old_desired=None, new_desired=None, min_size=1, max_size=5) == 4
    assert size_after_update(4, old_desired=2, new_desired=3, min_size=1, max_size=5) == 3
    assert size_after_update(4, old_desired=2, new_desired=2, min_size=1, max_size=3) == 3
    assert size_after_update(1, old_desired=None, new_desired=None, min_size=2, max_size=5) == 2


def test_growing_adds_unused_names_and_shrinking_removes_the_oldest_first() -> None:
    grown = plan_members(("0", "1"), 4, next_index=2)
    assert (grown.members, grown.added, grown.removed, grown.next_index) == (
        ("0", "1", "2", "3"),
        ("2", "3"),
        (),
        4,
    )
    shrunk = plan_members(grown.members, 3, next_index=grown.next_index)
    assert (shrunk.members, shrunk.added, shrunk.removed) == (("1", "2", "3"), (), ("0",))
    regrown = plan_members(shrunk.members, 4, next_index=shrunk.next_index)
    assert regrown.members == ("1", "2", "3", "4")  # "0" is never used again
    assert plan_members(("0", "1"), 2, next_index=2).members == ("0", "1")
    assert plan_members(("0", "1"), 0, next_index=2).removed == ("0", "1")


def test_failed_members_are_removed_before_the_oldest() -> None:
    plan = plan_members(("0", "1", "2", "3"), 2, failed={"2"}, next_index=4)
    assert plan.members == ("1", "3")
    assert plan.removed == ("0", "2")
    with pytest.raises(ScalingInvalid):
        plan_members(("0",), -1, next_index=1)


POLICY = Policy("scale_up", "change_in_capacity", 2, cooldown=60)
GROUP = Group("asg", size=2, min_size=1, max_size=5)


def test_a_signal_scales_the_group_and_starts_both_cooldowns() -> None:
    decision = decide_signal(POLICY, GROUP, None, policy_recorded=None, group_recorded=None, now=1000)
    assert decision.size == 4
    assert decision.policy_cooldown == Cooldown(1060, "change_in_capacity : 2")
    assert decision.group_cooldown == Cooldown(1000, "change_in_capacity : 2")
    assert decision.note == "change_in_capacity : 2: size 2 -> 4"


def test_a_signal_inside_the_cooldown_changes_nothing() -> None:
    recorded = Cooldown(1060, "change_in_capacity : 2")
    decision = decide_signal(POLICY, GROUP, {}, policy_recorded=recorded, group_recorded=None, now=1030)
    assert decision.size is None
    assert "due to cooldown" in decision.note
    assert decision.policy_cooldown == recorded
    group_cooling = decide_signal(
        Policy("p", "change_in_capacity", 1),
        GROUP,
        {},
        policy_recorded=None,
        group_recorded=recorded,
        now=1030,
    )
    assert group_cooling.size is None
    assert "asg could not perform scaling action" in group_cooling.note


def test_a_signal_at_the_bound_or_from_an_alarm_not_in_alarm_state_changes_nothing() -> None:
    full = Group("asg", size=5, min_size=1, max_size=5)
    at_max = decide_signal(POLICY, full, None, policy_recorded=None, group_recorded=None, now=0)
    assert at_max.size is None
    assert "already 5" in at_max.note
    assert at_max.policy_cooldown is None
    ok = decide_signal(POLICY, GROUP, {"current": "ok"}, policy_recorded=None, group_recorded=None, now=0)
    assert ok.size is None
    assert "alarm state is ok" in ok.note
    assert alarm_state({"state": "ALARM"}) == "alarm"
    assert alarm_state({"current": "insufficient data"}) == "insufficient data"
    assert alarm_state("text") == "alarm"


def test_signals_without_cooldown_add_up() -> None:
    group = GROUP
    for _ in range(10):
        step = decide_signal(
            Policy("p", "change_in_capacity", 1),
            Group("asg", group.size, 0, 100),
            None,
            policy_recorded=None,
            group_recorded=None,
            now=0,
        )
        assert step.size is not None
        group = Group("asg", step.size, 0, 100)
    assert group.size == 12


def test_growing_creates_new_members_at_once_while_existing_ones_update_in_batches() -> None:
    group = AutoScalingGroupProperties.model_validate(
        {"min_size": 1, "max_size": 9, "desired_capacity": 6, "resource": {"type": "T"}}
    )
    state = ScalingState(("0", "1", "2"), 3, 3, 3)
    template = scaling_template(group, state, (), DEFAULT_LIMITS, Budget(DEFAULT_LIMITS), False)
    depends = {name: r.get("depends_on") for name, r in template["resources"].items()}
    assert depends == {"0": None, "1": ["0"], "2": ["1"], "3": None, "4": None, "5": None}
