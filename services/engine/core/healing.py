"""Whether a closed round of observation heals the stack, and how. Pure.

Where it sits: `services.engine.healing` closes a round of observation once
every look it sent was answered (or its deadline passed), reads the stack,
its rows and the drift recorded, and asks `decide_heal`. A heal is one
update to the stack's current template with every drifted row marked first,
so the ordinary forward checks put the whole world back in dependency order:
a resource that is gone is created again (and its dependents follow its new
id), one in an error state is replaced, a changed property is updated in
place or the resource replaced, as its type requires.

What heals: the rows whose drift this round saw (on the same physical
resource), and every row recorded missing (gone, or a failed re-create of
one). When: the stack is at rest, and not failed by its user (a user's failed
operation is theirs to fix; a failed check only reports). A heal that failed
is retried after a pause that doubles with each failure (`HealPolicy`), even
when this round saw nothing new: the failed heal is the drift that remains.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from services.engine.core.model import Action, ResourceId, ResourceRow, StackRow, Status, TraversalId
from services.engine.core.row_change import NO_CHANGE, ResourceChange

#: Resources named in a heal's reason (the rest are counted).
NAMED = 10


@dataclass(frozen=True)
class HealPolicy:
    """Pauses before retrying a heal that failed: `first` seconds after the first
    failure, doubling after each further one, never more than `cap`."""

    first: float = 10.0
    cap: float = 600.0

    def pause(self, failures: int) -> float:
        return float(min(self.cap, self.first * 2.0 ** max(0, failures - 1)))


@dataclass(frozen=True)
class HealState:
    """What the stack's observation row remembers of healing."""

    traversal: TraversalId | None = None  # the last heal's
    attempts: int = 0  # heals started since the last one that succeeded
    not_before: float | None = None  # no retry before this instant (set after a failure)


@dataclass(frozen=True)
class SeenDrift:
    """A drift record: the resource, what was seen of it, and the round that last saw it."""

    resource_id: ResourceId
    physical_id: str | None
    reason: str
    differences: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    cycle: int = 0


class HealKind(StrEnum):
    NONE = "none"  # nothing to heal, or not now
    WAIT = "wait"  # the last heal failed: retry it no earlier than `not_before`
    HEAL = "heal"


@dataclass(frozen=True)
class HealDecision:
    kind: HealKind
    why: str = ""
    # HEAL: the row changes to make before the update (by row), the update's reason,
    # and the attempt this is (1 after a success).
    marks: Mapping[ResourceId, ResourceChange] = field(default_factory=dict)
    reason: str = ""
    attempts: int = 0
    not_before: float | None = None  # WAIT


def decide_heal(
    stack: StackRow,
    rows: Sequence[ResourceRow],
    drift: Sequence[SeenDrift],
    *,
    cycle: int,
    state: HealState,
    now: float,
    policy: HealPolicy,
) -> HealDecision:
    """Whether round `cycle`, just closed, heals `stack` (whose rows and drift records
    are given), at `now` (seconds since the epoch)."""
    if stack.action is Action.DELETE or stack.current_template_id is None:
        return HealDecision(HealKind.NONE, "the stack is being deleted or has no template")
    if stack.status is Status.IN_PROGRESS:
        return HealDecision(HealKind.NONE, "an operation is running; a later round heals")
    failed_heal = (
        stack.status is Status.FAILED
        and state.traversal is not None
        and stack.current_traversal == state.traversal
    )
    if stack.status is Status.FAILED and not failed_heal and stack.action is not Action.CHECK:
        return HealDecision(HealKind.NONE, "a failed operation of the stack's user is left to them")
    items = _to_heal(rows, drift, cycle)
    if not items and not failed_heal:
        return HealDecision(HealKind.NONE, "nothing drifted")
    if failed_heal:
        if state.not_before is None:
            until = now + policy.pause(state.attempts)
            return HealDecision(HealKind.WAIT, "the last heal failed", not_before=until)
        if now < state.not_before:
            return HealDecision(HealKind.NONE, "waiting to retry the heal that failed")
    attempts = state.attempts + 1 if failed_heal else 1
    marks = {row.resource_id: changes for row, _, changes in items if not changes.empty}
    reason = heal_reason([(row.name, why) for row, why, _ in items], attempt=attempts)
    return HealDecision(HealKind.HEAL, "drift", marks=marks, reason=reason, attempts=attempts)


def _to_heal(
    rows: Sequence[ResourceRow], drift: Sequence[SeenDrift], cycle: int
) -> list[tuple[ResourceRow, str, ResourceChange]]:
    """(row, why, marks) of each row to heal, in row order: drift this round saw on the
    resource the row holds now, and rows recorded missing (already marked)."""
    current = {r.resource_id: r for r in rows if r.replaced_by is None and r.current_job is None}
    seen = {d.resource_id: d for d in drift}
    out: list[tuple[ResourceRow, str, ResourceChange]] = []
    for row in current.values():
        record = seen.get(row.resource_id)
        if row.physical_id is None and row.status is Status.FAILED:
            out.append((row, record.reason if record is not None else row.status_reason, NO_CHANGE))
        elif record is not None and record.physical_id == row.physical_id and record.cycle == cycle:
            out.append((row, record.reason, drift_marks(row, record)))
    return sorted(out, key=lambda item: item[0].resource_id)


def drift_marks(row: ResourceRow, record: SeenDrift) -> ResourceChange:
    """Row changes after which a forward check converges the drifted resource back:
    changed properties are recorded as they are now (the diff against the goal then
    shows them); a resource in an error state is marked failed (it is replaced)."""
    if record.differences:
        actual = {name: value.get("actual") for name, value in record.differences.items()}
        return ResourceChange(properties={**(row.properties or {}), **actual})
    return ResourceChange(action=Action.CHECK, status=Status.FAILED, status_reason=record.reason)


def heal_reason(items: Sequence[tuple[str, str]], *, attempt: int = 1) -> str:
    """The heal's reason, e.g. "Healing drift of net, subnet: the resource no longer
    exists"; one reason per resource when they differ."""
    retry = f" (attempt {attempt})" if attempt > 1 else ""
    if not items:
        return f"Healing drift: retrying the heal that failed{retry}"
    more = len(items) - NAMED
    tail = f" and {more} more" if more > 0 else ""
    reasons = {why for _, why in items}
    if len(reasons) == 1:
        names = ", ".join(name for name, _ in items[:NAMED])
        return f"Healing drift of {names}{tail}: {reasons.pop()}{retry}"
    each = "; ".join(f"{name}: {why}" for name, why in items[:NAMED])
    return f"Healing drift of {each}{tail}{retry}"
