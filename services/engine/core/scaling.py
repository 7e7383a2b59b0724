"""Autoscaling decisions (OS::Heat::AutoScalingGroup, OS::Heat::ScalingPolicy). Pure.

Where it sits: the decisions a scaling signal and a group update need, with no
I/O, so the shells that store a group's state and start its child stack's
update only read rows, call these and write what they return.

- `new_capacity`: a policy's adjustment applied to the group's current size
  (Heat's `change_in_capacity`, `exact_capacity`, `percent_change_in_capacity`
  with `min_adjustment_step`), kept within `min_size`..`max_size`.
- `cooldown_refusal` / `cooldown_after`: Heat's cooldown. A policy (or a group)
  that scaled records when its cooldown ends (the later of the old end and
  now + cooldown); a signal before then does nothing and says "cooldown". A
  signal that does not change the size starts no cooldown.
- `initial_size` / `size_after_update`: the size a group is created with
  (desired_capacity, else min_size) and keeps through a stack update: the
  size it was scaled to, unless the update changes desired_capacity (then
  that), always within the new bounds.
- `plan_members`: which members a group of a given size has. Members are
  kept in creation order; shrinking removes failed members first, then the
  oldest (Heat's grouputils order), growing adds new names that are never
  reused, so survivors keep their names (and so their resources).
- `decide_signal`: a policy's signal, all of the above together.

Differences from Heat: a signal is never refused because a scaling is in
progress (Heat's `scaling_in_progress`): scaling is an update of the group's
child stack, and a later one preempts an earlier one, so rapid signals
converge on the last decided size; and a cooldown is counted from the
signal's decision rather than from the end of the resize.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from shared.errors import InvalidInput

AdjustmentType = Literal["change_in_capacity", "exact_capacity", "percent_change_in_capacity"]
ADJUSTMENT_TYPES: tuple[AdjustmentType, ...] = (
    "change_in_capacity",
    "exact_capacity",
    "percent_change_in_capacity",
)
#: The alarm states (Aodh's `current`, or `state`) in which a policy acts.
ACTING_STATE = "alarm"


class ScalingInvalid(InvalidInput):
    """A group's sizes or a policy's adjustment cannot be used."""


def check_sizes(min_size: int, max_size: int, desired_capacity: int | None) -> str | None:
    """Why these group sizes are invalid (Heat's messages), or None."""
    if min_size < 0:
        return "min_size: the size of an AutoScalingGroup can not be less than zero"
    if max_size < min_size:
        return "min_size: min_size can not be greater than max_size"
    if desired_capacity is not None and not min_size <= desired_capacity <= max_size:
        return "desired_capacity: desired_capacity must be between min_size and max_size"
    return None


def _with_step(adjustment: int, min_adjustment_step: int | None) -> int:
    """`adjustment` made at least `min_adjustment_step` in size, keeping its sign."""
    if min_adjustment_step and min_adjustment_step > abs(adjustment):
        return min_adjustment_step if adjustment > 0 else -min_adjustment_step
    return adjustment


def _percent(current: int, percent: float) -> int:
    """`percent` of `current` as a whole change: a change smaller than one member is
    rounded away from zero (so it changes something), a larger one towards zero."""
    delta = current * percent / 100.0
    if abs(delta) < 1.0:
        return math.ceil(delta) if delta > 0 else math.floor(delta)
    return math.floor(delta) if delta > 0 else math.ceil(delta)


def new_capacity(
    current: int,
    adjustment: float,
    adjustment_type: AdjustmentType,
    *,
    minimum: int,
    maximum: int,
    min_adjustment_step: int | None = None,
) -> int:
    """The group's size after `adjustment` of `adjustment_type`, within `minimum`..`maximum`.
    `min_adjustment_step` only applies to `percent_change_in_capacity` (as in Heat)."""
    if adjustment_type == "change_in_capacity":
        size = current + int(adjustment)
    elif adjustment_type == "exact_capacity":
        size = int(adjustment)
    elif adjustment_type == "percent_change_in_capacity":
        size = current + _with_step(_percent(current, adjustment), min_adjustment_step)
    else:
        raise ScalingInvalid(
            f"adjustment_type: {adjustment_type!r} is not one of {', '.join(ADJUSTMENT_TYPES)}"
        )
    return max(minimum, min(maximum, size))


# -- cooldown -------------------------------------------------------------------


@dataclass(frozen=True)
class Cooldown:
    """What a policy or group records after it scaled: when its cooldown ends (epoch
    seconds) and why (e.g. "change_in_capacity : 2")."""

    ends_at: float
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"ends_at": self.ends_at, "reason": self.reason}

    @classmethod
    def from_dict(cls, raw: Any) -> Cooldown | None:
        """The recorded cooldown in `raw` (None when none is, or it is unreadable)."""
        if not isinstance(raw, dict):
            return None
        ends_at, reason = raw.get("ends_at"), raw.get("reason", "")
        if not isinstance(ends_at, int | float) or isinstance(ends_at, bool):
            return None
        return cls(float(ends_at), str(reason))


def cooldown_refusal(name: str, recorded: Cooldown | None, *, now: float) -> str | None:
    """Why `name` may not scale now (it is in its cooldown), or None. Heat's
    NoActionRequired: the signal is accepted and nothing changes."""
    if recorded is None or now >= recorded.ends_at:
        return None
    left = math.ceil(recorded.ends_at - now)
    return (
        f"The resource {name} could not perform scaling action: due to cooldown, "
        f"{left}s left (last scaling: {recorded.reason})"
    )


def cooldown_after(
    recorded: Cooldown | None, *, cooldown: float | None, now: float, reason: str, size_changed: bool
) -> Cooldown | None:
    """What is recorded once a scaling was decided at `now`: a size change starts a
    cooldown of `cooldown` seconds (never ending before one already running); a
    signal that changed nothing leaves the record as it was."""
    if not size_changed:
        return recorded
    ends_at = now + max(0.0, float(cooldown or 0))
    if recorded is not None:
        ends_at = max(ends_at, recorded.ends_at)
    return Cooldown(ends_at, reason)


# -- the group's size -----------------------------------------------------------


def initial_size(min_size: int, desired_capacity: int | None) -> int:
    """A new group's size: desired_capacity when given, else min_size."""
    return min_size if desired_capacity is None else desired_capacity


def size_after_update(
    current: int | None,
    *,
    old_desired: int | None,
    new_desired: int | None,
    min_size: int,
    max_size: int,
) -> int:
    """The size a group keeps through an update of its properties: the size it was
    scaled to (`current`), unless desired_capacity changed (then the new one), and
    within the new `min_size`..`max_size`. A group with no size yet takes its
    `initial_size`."""
    if current is None:
        size = initial_size(min_size, new_desired)
    elif new_desired is not None and new_desired != old_desired:
        size = new_desired
    else:
        size = current
    return max(min_size, min(max_size, size))


# -- members --------------------------------------------------------------------


def new_names(next_index: int) -> Iterator[str]:
    """Member names never used before in a group whose next unused index is `next_index`."""
    index = next_index
    while True:
        yield str(index)
        index += 1


@dataclass(frozen=True)
class MemberPlan:
    members: tuple[str, ...]  # oldest first
    added: tuple[str, ...]
    removed: tuple[str, ...]
    next_index: int


def plan_members(
    members: Sequence[str], size: int, *, failed: Iterable[str] = (), next_index: int
) -> MemberPlan:
    """The members of a group of `size`, from its current `members` (oldest first).

    Shrinking removes the `failed` members first, then the oldest; growing adds
    members named from `next_index` on (never a name used before), after the
    survivors. The survivors keep their names and their order."""
    if size < 0:
        raise ScalingInvalid(f"a group's size cannot be negative ({size})")
    bad = set(failed)
    ranked = [m for m in members if m in bad] + [m for m in members if m not in bad]
    kept = ranked[len(ranked) - size :] if size < len(ranked) else ranked
    survivors = tuple(m for m in members if m in set(kept))
    fresh = new_names(next_index)
    added = tuple(next(fresh) for _ in range(size - len(survivors)))
    removed = tuple(m for m in members if m not in set(survivors))
    return MemberPlan(survivors + added, added, removed, next_index + len(added))


# -- a policy's signal ----------------------------------------------------------


@dataclass(frozen=True)
class Policy:
    name: str
    adjustment_type: AdjustmentType
    scaling_adjustment: float
    min_adjustment_step: int | None = None
    cooldown: float | None = None


@dataclass(frozen=True)
class Group:
    name: str
    size: int
    min_size: int
    max_size: int
    cooldown: float | None = None


@dataclass(frozen=True)
class SignalDecision:
    """A policy signal's outcome: the group's new size (None: nothing to do, `note`
    says why) and what the policy and the group record."""

    size: int | None
    note: str
    policy_cooldown: Cooldown | None
    group_cooldown: Cooldown | None


def alarm_state(details: Any) -> str:
    """The alarm state a signal reports (Aodh's `current`, else `state`; "alarm" when
    neither is given), lower case."""
    if isinstance(details, dict):
        state = details.get("current", details.get("state", ACTING_STATE))
        if isinstance(state, str):
            return state.lower()
    return ACTING_STATE


def decide_signal(
    policy: Policy,
    group: Group,
    details: Any,
    *,
    policy_recorded: Cooldown | None,
    group_recorded: Cooldown | None,
    now: float,
) -> SignalDecision:
    """What a signal to `policy` does to `group` at `now`: nothing when the alarm is
    not in "alarm" state, or the policy or the group is in its cooldown, or the size
    would not change; else the new size, and both start their cooldowns."""

    def nothing(note: str) -> SignalDecision:
        return SignalDecision(None, note, policy_recorded, group_recorded)

    state = alarm_state(details)
    if state != ACTING_STATE:
        return nothing(f"The resource {policy.name} could not perform scaling action: alarm state is {state}")
    refusal = cooldown_refusal(policy.name, policy_recorded, now=now) or cooldown_refusal(
        group.name, group_recorded, now=now
    )
    if refusal is not None:
        return nothing(refusal)
    size = new_capacity(
        group.size,
        policy.scaling_adjustment,
        policy.adjustment_type,
        minimum=group.min_size,
        maximum=group.max_size,
        min_adjustment_step=policy.min_adjustment_step,
    )
    reason = f"{policy.adjustment_type} : {_number(policy.scaling_adjustment)}"
    if size == group.size:
        return nothing(
            f"The resource {group.name} could not perform scaling action: its size is already {size} "
            f"(min_size {group.min_size}, max_size {group.max_size})"
        )
    return SignalDecision(
        size,
        f"{reason}: size {group.size} -> {size}",
        cooldown_after(policy_recorded, cooldown=policy.cooldown, now=now, reason=reason, size_changed=True),
        cooldown_after(group_recorded, cooldown=group.cooldown, now=now, reason=reason, size_changed=True),
    )


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
