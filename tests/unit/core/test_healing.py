"""When a closed round of observation heals a stack, what it marks, and the backoff of a
heal that failed. Pure: rows, stacks and drift records are built in memory."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest

from services.engine.core.healing import (
    HealKind,
    HealPolicy,
    HealState,
    SeenDrift,
    decide_heal,
    drift_marks,
    heal_reason,
)
from services.engine.core.model import (
    Action,
    ResourceId,
    ResourceRow,
    StackId,
    StackRow,
    Status,
    TemplateId,
    TraversalId,
)
from services.engine.core.row_change import ResourceChange

STACK_ID = StackId(uuid.uuid4())
TEMPLATE = TemplateId(uuid.uuid4())
HEAL = TraversalId(uuid.uuid4())
POLICY = HealPolicy(first=10.0, cap=60.0)
NOW = 1_000.0
GONE = "the resource no longer exists"


def stack(action: Action = Action.CREATE, status: Status = Status.COMPLETE, **changes: Any) -> StackRow:
    made = StackRow(STACK_ID, "p", "web", action, status, "", TraversalId(uuid.uuid4()), TEMPLATE, TEMPLATE)
    return dataclasses.replace(made, **changes)


def row(resource_id: int, name: str, physical_id: str | None = None, **extra: Any) -> ResourceRow:
    fields: dict[str, Any] = {"properties": {"name": name}, **extra}
    return ResourceRow(
        ResourceId(resource_id),
        STACK_ID,
        name,
        "T",
        physical_id if physical_id is not None else f"{name}-1",
        fields.pop("action", Action.CREATE),
        fields.pop("status", Status.COMPLETE),
        **fields,
    )


def missing(resource_id: int, name: str) -> ResourceRow:
    return dataclasses.replace(
        row(resource_id, name),
        physical_id=None,
        action=Action.CHECK,
        status=Status.FAILED,
        status_reason=GONE,
    )


def drifted(r: ResourceRow, reason: str, cycle: int = 5, **differences: Any) -> SeenDrift:
    return SeenDrift(r.resource_id, r.physical_id, reason, differences, cycle)


def decide(
    s: StackRow,
    rows: list[ResourceRow],
    drift: list[SeenDrift],
    state: HealState | None = None,
    now: float = NOW,
) -> Any:
    return decide_heal(s, rows, drift, cycle=5, state=state or HealState(), now=now, policy=POLICY)


def test_one_heal_marks_every_resource_the_round_found_drifted_and_every_missing_one() -> None:
    net, subnet, web = missing(1, "net"), missing(2, "subnet"), row(3, "web")
    lb, db = row(4, "lb"), row(5, "db")
    records = [
        SeenDrift(net.resource_id, "net-1", GONE, {}, 5),
        SeenDrift(subnet.resource_id, "subnet-1", GONE, {}, 3),  # seen gone in an earlier round
        drifted(web, "the resource is in an error state: host lost"),
        drifted(lb, "changed out of band: name", name={"expected": "lb", "actual": "hacked"}),
    ]
    decision = decide(stack(), [db, lb, web, subnet, net], records)
    assert decision.kind is HealKind.HEAL
    assert set(decision.marks) == {web.resource_id, lb.resource_id}, "missing rows are marked already"
    assert decision.marks[lb.resource_id] == ResourceChange(properties={"name": "hacked"})
    assert decision.marks[web.resource_id].status is Status.FAILED
    assert decision.reason == (
        f"Healing drift of net: {GONE}; subnet: {GONE}; web: the resource is in an error state: host lost; "
        "lb: changed out of band: name"
    )
    assert decision.attempts == 1


def test_only_drift_this_round_saw_on_the_resource_the_row_holds_now_is_healed() -> None:
    app = row(1, "app")
    older = drifted(app, "changed out of band: name", cycle=4, name={"expected": "app", "actual": "x"})
    assert decide(stack(), [app], [older]).kind is HealKind.NONE
    replaced_since = SeenDrift(app.resource_id, "app-0", "the resource is in an error state", {}, 5)
    assert decide(stack(), [app], [replaced_since]).kind is HealKind.NONE
    busy = dataclasses.replace(app, current_job="job-1")
    assert decide(stack(), [busy], [drifted(busy, "broken")]).kind is HealKind.NONE
    assert decide(stack(), [app], []).kind is HealKind.NONE


@pytest.mark.parametrize(
    "current",
    [
        stack(status=Status.IN_PROGRESS),
        stack(Action.DELETE, Status.FAILED),
        stack(Action.UPDATE, Status.FAILED),  # the user's own update failed: theirs to fix
        stack(Action.ROLLBACK, Status.FAILED),
        stack(current_template_id=None),
    ],
)
def test_no_heal_while_an_operation_runs_or_after_a_users_failed_operation(current: StackRow) -> None:
    assert decide(current, [missing(1, "net")], []).kind is HealKind.NONE


def test_a_stack_whose_check_failed_or_that_rolled_back_is_healed() -> None:
    for current in (stack(Action.CHECK, Status.FAILED), stack(Action.ROLLBACK, Status.COMPLETE)):
        assert decide(current, [missing(1, "net")], []).kind is HealKind.HEAL


def test_a_failed_heal_is_retried_after_a_pause_even_when_nothing_new_drifted() -> None:
    failed = stack(Action.UPDATE, Status.FAILED, current_traversal=HEAL)
    first = HealState(HEAL, attempts=1)
    waiting = decide(failed, [row(1, "net")], [], first)
    assert (waiting.kind, waiting.not_before) == (HealKind.WAIT, NOW + 10.0)
    paused = HealState(HEAL, attempts=1, not_before=NOW + 10.0)
    assert decide(failed, [row(1, "net")], [], paused, now=NOW + 9.9).kind is HealKind.NONE
    retry = decide(failed, [row(1, "net")], [], paused, now=NOW + 10.0)
    assert retry.kind is HealKind.HEAL
    assert retry.attempts == 2
    assert retry.reason == "Healing drift: retrying the heal that failed (attempt 2)"
    with_drift = decide(failed, [missing(1, "net")], [], paused, now=NOW + 10.0)
    assert with_drift.reason == f"Healing drift of net: {GONE} (attempt 2)"


def test_the_pause_before_a_retry_doubles_with_each_failure_up_to_the_cap() -> None:
    assert [POLICY.pause(n) for n in range(1, 6)] == [10.0, 20.0, 40.0, 60.0, 60.0]
    failed = stack(Action.UPDATE, Status.FAILED, current_traversal=HEAL)
    assert decide(failed, [], [], HealState(HEAL, attempts=3)).not_before == NOW + 40.0


def test_a_heal_after_a_success_starts_counting_attempts_again() -> None:
    healed = stack(Action.UPDATE, Status.COMPLETE, current_traversal=HEAL)
    decision = decide(healed, [missing(1, "net")], [], HealState(HEAL, attempts=4))
    assert (decision.kind, decision.attempts) == (HealKind.HEAL, 1)


def test_marks_put_changed_values_on_the_row_and_fail_a_broken_resource() -> None:
    app = row(1, "app", properties={"name": "app", "size": 1})
    changed = drifted(app, "changed", size={"expected": 1, "actual": 3})
    assert drift_marks(app, changed) == ResourceChange(properties={"name": "app", "size": 3})
    broken = drift_marks(app, drifted(app, "in ERROR"))
    assert broken == ResourceChange(action=Action.CHECK, status=Status.FAILED, status_reason="in ERROR")


def test_a_heal_reason_names_the_resources_and_counts_beyond_ten() -> None:
    assert heal_reason([("web1", "gone")]) == "Healing drift of web1: gone"
    many = [(f"r{i}", "gone") for i in range(12)]
    assert heal_reason(many) == "Healing drift of r0, r1, r2, r3, r4, r5, r6, r7, r8, r9 and 2 more: gone"
