"""The rules of signal limits and of mark-unhealthy, as pure functions."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from services.engine.core.model import Action, ResourceId, ResourceRow, StackId, StackRow, Status
from services.engine.marks import DEFAULT_REASON, Verdict, verdict
from services.engine.signals import cut, signals_closed

STACK = StackRow(
    stack_id=StackId(uuid.uuid4()),
    project_id="p",
    name="s",
    action=Action.CREATE,
    status=Status.COMPLETE,
    status_reason="",
    current_traversal=None,
    current_template_id=None,
    previous_template_id=None,
)


def row(action: Action, status: Status) -> ResourceRow:
    return ResourceRow(
        resource_id=ResourceId(1),
        stack_id=STACK.stack_id,
        name="r",
        type="T",
        physical_id=None,
        action=action,
        status=status,
    )


def test_a_reason_is_cut_to_the_limit_and_says_so() -> None:
    assert cut("short", 10) == "short"
    assert cut("x" * 300, 255) == "x" * 252 + "..."
    assert len(cut("x" * 300, 255)) == 255


@pytest.mark.parametrize(
    ("action", "status", "closed"),
    [
        (Action.CREATE, Status.IN_PROGRESS, False),  # a condition may still start waiting
        (Action.UPDATE, Status.IN_PROGRESS, False),
        (Action.CREATE, Status.COMPLETE, True),  # every condition has completed
        (Action.CREATE, Status.FAILED, True),
        (Action.CHECK, Status.IN_PROGRESS, True),  # no condition starts during a check
        (Action.DELETE, Status.IN_PROGRESS, True),
    ],
)
def test_signals_close_once_no_condition_waits_or_can_start_to(
    action: Action, status: Status, closed: bool
) -> None:
    stack = dataclasses.replace(STACK, action=action, status=status)
    assert signals_closed(stack, []) is closed
    assert signals_closed(stack, [row(Action.CREATE, Status.IN_PROGRESS)]) is False, "one waits"


def test_marking_follows_heats_rules() -> None:
    complete = row(Action.CREATE, Status.COMPLETE)
    assert verdict(complete, unhealthy=True, reason="") == Verdict(
        Action.CHECK, Status.FAILED, DEFAULT_REASON
    )
    assert verdict(complete, unhealthy=False, reason="fine") is None, "healthy already"
    marked = row(Action.CHECK, Status.FAILED)
    assert verdict(marked, unhealthy=False, reason="fixed") == Verdict(Action.CHECK, Status.COMPLETE, "fixed")
    assert verdict(row(Action.DELETE, Status.FAILED), unhealthy=True, reason="x") is None
