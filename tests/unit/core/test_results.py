"""What a job's result does to its row, its node and its stack (`core.results.decide_result`).
Pure: rows and results are built here, nothing is stored or sent."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest

from services.engine.core.model import (
    Action,
    Node,
    ResourceId,
    ResourceRow,
    StackId,
    StackRow,
    Status,
    TemplateId,
    TraversalId,
)
from services.engine.core.node_checks import Replacement
from services.engine.core.results import JOB_DONE, ResultEvent, Then, asks_still_wanted, decide_result
from shared.protocol import JobAction, JobOutcome, JobResult

STACK = StackId(uuid.uuid4())
TRAVERSAL = TraversalId(uuid.uuid4())
OLDER = TraversalId(uuid.uuid4())
APPLIED = TemplateId(uuid.uuid4())
GOAL = TemplateId(uuid.uuid4())


def stack(action: Action = Action.UPDATE, traversal: TraversalId | None = TRAVERSAL) -> StackRow:
    return StackRow(STACK, "p", "s", action, Status.IN_PROGRESS, "", traversal, GOAL, APPLIED)


def running(traversal: TraversalId = TRAVERSAL, **extra: Any) -> ResourceRow:
    """A row whose job `j1` (an update of `{"v": "old"}` to `{"v": "new"}`) is in flight."""
    fields: dict[str, Any] = {
        "properties": {"v": "old"},
        "attributes": {"a": 1, "b": 2},
        "template_id": APPLIED,
        "current_job": "j1",
        "job_node": Node(3),
        "job_properties": {"v": "new"},
        "job_requires": frozenset({ResourceId(7)}),
        "job_template_id": GOAL,
        "traversal_id": traversal,
        **extra,
    }
    return ResourceRow(ResourceId(1), STACK, "r", "T", "p1", Action.UPDATE, Status.IN_PROGRESS, **fields)


def result(outcome: JobOutcome, action: JobAction = JobAction.UPDATE, **extra: Any) -> JobResult:
    return JobResult(
        job_id="j1",
        stack_id=str(STACK),
        traversal_id=str(TRAVERSAL),
        resource_id=1,
        resource_name="r",
        action=action,
        outcome=outcome,
        **extra,
    )


def test_a_successful_update_applies_what_the_job_applied_and_finishes_the_node() -> None:
    decision = decide_result(
        running(), result(JobOutcome.COMPLETE, physical_id="p1", attributes={"a": 5}), stack()
    )

    assert decision.then is Then.NODE_DONE
    assert not decision.delete
    assert decision.changes.written() == {
        "status": Status.COMPLETE,
        "status_reason": "state changed",
        "physical_id": "p1",
        "attributes": {"a": 5},  # a create or update replaces them
        "properties": {"v": "new"},
        "requires": frozenset({ResourceId(7)}),
        "template_id": GOAL,
        **JOB_DONE.written(),
    }
    assert decision.event == ResultEvent("p1", Action.UPDATE, Status.COMPLETE, "state changed")


def test_a_check_or_resume_merges_the_attributes_it_reports_into_the_rows() -> None:
    decision = decide_result(
        running(),
        result(JobOutcome.COMPLETE, JobAction.CHECK, physical_id="p1", attributes={"b": 3}),
        stack(),
    )

    assert decision.changes.attributes == {"a": 1, "b": 3}


def test_a_success_without_a_job_template_keeps_the_rows_template() -> None:
    decision = decide_result(running(job_template_id=None), result(JobOutcome.COMPLETE), stack())

    assert decision.changes.template_id == APPLIED


def test_an_in_progress_result_records_its_physical_id_and_asks_an_observer() -> None:
    decision = decide_result(running(), result(JobOutcome.IN_PROGRESS, physical_id="p2"), stack())

    assert decision.then is Then.OBSERVE
    assert decision.changes.written() == {"physical_id": "p2", "observing_job": "j1"}
    assert decision.observed == "p2"
    assert decision.event is None


def test_an_in_progress_result_without_a_physical_id_keeps_the_rows() -> None:
    decision = decide_result(running(), result(JobOutcome.IN_PROGRESS), stack())

    assert decision.changes.physical_id == decision.observed == "p1"


def test_replace_from_the_current_traversal_completes_the_row_and_replaces_it() -> None:
    decision = decide_result(running(), result(JobOutcome.REPLACE, reason="image changed"), stack())

    assert decision.then is Then.REPLACE
    assert decision.changes.written() == {
        "action": Action.UPDATE,
        "status": Status.COMPLETE,
        **JOB_DONE.written(),
    }
    assert decision.reason == "image changed"
    assert decision.event is None


def test_a_replacement_after_replace_is_made_with_what_the_job_would_have_applied() -> None:
    decision = decide_result(
        running(deletion_policy="Retain"), result(JobOutcome.REPLACE, reason="image changed"), stack()
    )

    assert decision.replacement == Replacement(
        type_name="T",
        properties={"v": "new"},
        requires=frozenset({ResourceId(7)}),
        deletion_policy="Retain",
        metadata=None,  # carried over from the replaced row
        why="image changed",
    )


def test_replace_from_a_superseded_traversal_fails_the_row_and_wakes_the_waiting_check() -> None:
    decision = decide_result(running(traversal=OLDER), result(JobOutcome.REPLACE), stack())

    assert decision.then is Then.WAKE_WAITING
    assert decision.changes.status is Status.FAILED
    assert decision.changes.status_reason == "Resource UPDATE failed: replacement needed"


def test_a_failed_update_fails_the_stack_and_keeps_the_applied_properties() -> None:
    decision = decide_result(running(), result(JobOutcome.FAILED, reason="quota exceeded"), stack())

    assert decision.then is Then.FAIL_STACK
    assert decision.reason == "Resource UPDATE failed: quota exceeded"
    assert decision.changes.written() == {
        "physical_id": "p1",
        "properties": {"v": "old"},  # a retried update applies its change again
        "status": Status.FAILED,
        "status_reason": "Resource UPDATE failed: quota exceeded",
        **JOB_DONE.written(),
    }
    assert decision.event == ResultEvent("p1", Action.UPDATE, Status.FAILED, decision.reason)


def test_a_failed_create_keeps_what_it_tried_so_the_delete_can_remove_it() -> None:
    row = running(properties=None)
    decision = decide_result(
        row, result(JobOutcome.FAILED, JobAction.CREATE, physical_id="p9", reason="ERROR"), stack()
    )

    assert decision.changes.properties == {"v": "new"}
    assert decision.changes.physical_id == "p9"
    assert decision.reason == "Resource CREATE failed: ERROR"


def test_a_resource_found_gone_by_a_stack_check_is_recorded_missing_and_its_dependents_go_on() -> None:
    decision = decide_result(running(), result(JobOutcome.GONE, JobAction.CHECK), stack(Action.CHECK))

    assert decision.then is Then.NODE_DONE
    reason = "Resource CHECK failed: the resource no longer exists"
    assert decision.changes.physical_id is None
    assert decision.changes.action is Action.CHECK
    assert decision.changes.status_reason == reason
    assert decision.event == ResultEvent("p1", Action.CHECK, Status.FAILED, reason)


def test_a_failure_of_a_superseded_traversal_only_wakes_the_waiting_check() -> None:
    decision = decide_result(running(traversal=OLDER), result(JobOutcome.FAILED), stack())

    assert decision.then is Then.WAKE_WAITING


def test_a_failure_after_the_stack_was_deleted_only_wakes_the_waiting_check() -> None:
    decision = decide_result(running(), result(JobOutcome.FAILED), None)

    assert decision.then is Then.WAKE_WAITING


def test_a_finished_delete_deletes_the_row() -> None:
    decision = decide_result(running(), result(JobOutcome.COMPLETE, JobAction.DELETE), stack(Action.DELETE))

    assert decision.delete
    assert decision.then is Then.NODE_DONE
    assert decision.event == ResultEvent(None, Action.DELETE, Status.COMPLETE, "state changed")


def test_a_delete_the_current_traversal_still_wants_keeps_the_row_empty() -> None:
    decision = decide_result(
        running(traversal=OLDER), result(JobOutcome.COMPLETE, JobAction.DELETE), stack(), still_wanted=True
    )

    assert not decision.delete
    assert decision.then is Then.WAKE_WAITING  # its waiting check creates the resource again
    assert decision.changes.written() == {
        "physical_id": None,
        "action": Action.DELETE,
        "status": Status.COMPLETE,
        "status_reason": "",
        "properties": None,
        "attributes": {},
        **JOB_DONE.written(),
    }


def test_a_success_of_a_superseded_traversal_wakes_the_waiting_check() -> None:
    decision = decide_result(running(traversal=OLDER), result(JobOutcome.COMPLETE), stack())

    assert decision.then is Then.WAKE_WAITING
    assert decision.changes.status is Status.COMPLETE


@pytest.mark.parametrize("status", [Status.FAILED, Status.COMPLETE])
@pytest.mark.parametrize("outcome", [JobOutcome.COMPLETE, JobOutcome.REPLACE])
def test_a_job_that_outlived_its_operation_records_its_outcome_and_nothing_follows(
    status: Status, outcome: JobOutcome
) -> None:
    ended = dataclasses.replace(stack(), status=status)
    decision = decide_result(running(), result(outcome), ended)

    assert decision.then is Then.WAKE_WAITING, "no dependents checked, no replacement made"
    assert decision.replacement is None


@pytest.mark.parametrize(
    ("action", "outcome", "asks"),
    [
        (JobAction.DELETE, JobOutcome.COMPLETE, True),
        (JobAction.DELETE, JobOutcome.FAILED, False),
        (JobAction.DELETE, JobOutcome.IN_PROGRESS, False),
        (JobAction.CREATE, JobOutcome.COMPLETE, False),
    ],
)
def test_only_a_finished_delete_asks_whether_the_row_is_still_wanted(
    action: JobAction, outcome: JobOutcome, asks: bool
) -> None:
    assert asks_still_wanted(result(outcome, action)) is asks
