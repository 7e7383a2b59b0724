"""What a node check does once its rows are read, and how a traversal ends
(`core.node_checks`). Pure: rows are built here, nothing is stored or sent."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest

from services.engine.core.decide import Cleanup, Forward, ForwardDecision
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
    cleanup,
    forward,
)
from services.engine.core.nesting import STACK_TYPE
from services.engine.core.node_checks import (
    ForwardGoal,
    JobOrder,
    NodeKind,
    Replacement,
    RowEvent,
    Then,
    issued,
    kind_of,
    moved_by_its_job,
    originals_to_restore,
    plan_action,
    plan_cleanup,
    plan_forward,
    rolls_back,
    superseded,
    traversal_end,
    unresolved,
    waits_for_job,
)
from services.engine.core.row_change import NO_CHANGE, UNSET, ResourceChange
from shared.protocol import JobAction

STACK = StackId(uuid.uuid4())
TRAVERSAL = TraversalId(uuid.uuid4())
OLDER = TraversalId(uuid.uuid4())
APPLIED = TemplateId(uuid.uuid4())
GOAL = TemplateId(uuid.uuid4())
RID = ResourceId(5)


def stack(action: Action = Action.UPDATE, traversal: TraversalId | None = TRAVERSAL) -> StackRow:
    return StackRow(
        stack_id=STACK,
        project_id="p",
        name="s",
        action=action,
        status=Status.IN_PROGRESS,
        status_reason="",
        current_traversal=traversal,
        current_template_id=GOAL,
        previous_template_id=APPLIED,
    )


def row(physical_id: str | None = "p1", type_name: str = "T", **extra: Any) -> ResourceRow:
    fields: dict[str, Any] = {
        "properties": {"v": "old"},
        "requires": frozenset({ResourceId(7)}),
        "template_id": APPLIED,
        **extra,
    }
    return ResourceRow(
        resource_id=RID,
        stack_id=STACK,
        name="r",
        type=type_name,
        physical_id=physical_id,
        action=Action.CREATE,
        status=Status.COMPLETE,
        **fields,
    )


def goal(**extra: Any) -> ForwardGoal:
    fields: dict[str, Any] = {
        "type_name": "T",
        "deletion_policy": "Delete",
        "external_id": None,
        "template_id": GOAL,
        "properties": {"v": "new"},
        "requires": frozenset({ResourceId(8)}),
        "metadata": {"m": 1},
        **extra,
    }
    return ForwardGoal(**fields)


# -- whether the check goes on -------------------------------------------------------


def test_a_check_of_a_traversal_the_stack_moved_on_from_is_superseded() -> None:
    assert superseded(stack(traversal=OLDER), TRAVERSAL)
    assert superseded(None, TRAVERSAL)  # the stack is gone
    assert not superseded(stack(), TRAVERSAL)


def test_a_check_of_an_operation_that_has_failed_or_completed_stops() -> None:
    # a stall sweep's or a redelivery's check arriving after the stack failed must not
    # go on with the failed operation (it once finished a failed delete on its own)
    assert superseded(dataclasses.replace(stack(), status=Status.FAILED), TRAVERSAL)
    assert superseded(dataclasses.replace(stack(), status=Status.COMPLETE), TRAVERSAL)


def test_a_check_sent_again_while_its_own_job_runs_does_nothing() -> None:
    mine = row(current_job="j1", traversal_id=TRAVERSAL, job_node=forward(RID))
    assert moved_by_its_job(mine, TRAVERSAL, forward(RID))
    assert not moved_by_its_job(mine, TRAVERSAL, cleanup(RID)), "another node's check is no duplicate"
    older = row(current_job="j1", traversal_id=OLDER, job_node=forward(RID))
    assert not moved_by_its_job(older, TRAVERSAL, forward(RID)), "an older traversal's job is waited for"


def test_a_forward_check_of_a_row_already_replaced_does_nothing_but_its_cleanup_goes_on() -> None:
    replaced = row(replaced_by=ResourceId(9))
    assert moved_by_its_job(replaced, TRAVERSAL, forward(RID))
    assert not moved_by_its_job(replaced, TRAVERSAL, cleanup(RID))


def test_a_check_waits_for_an_older_job_unless_nested_or_preempted() -> None:
    busy = row(current_job="j0", traversal_id=OLDER)
    assert waits_for_job(busy, preempted=False)
    assert not waits_for_job(busy, preempted=True), "a delete or rollback takes a deployment's row"
    nested = row(current_job="j0", traversal_id=OLDER, type_name=STACK_TYPE)
    assert not waits_for_job(nested, preempted=False), "the new job preempts the child's operation"
    assert not waits_for_job(row(), preempted=False), "no job: nothing to wait for"


@pytest.mark.parametrize("action", [Action.CHECK, Action.SUSPEND, Action.RESUME, Action.SNAPSHOT])
def test_every_node_of_a_stack_action_runs_that_action(action: Action) -> None:
    assert kind_of(stack(action), forward(RID)) is NodeKind.ACTION
    assert kind_of(stack(action), cleanup(RID)) is NodeKind.ACTION


def test_a_node_of_an_update_is_forward_or_cleanup_by_its_node() -> None:
    assert kind_of(stack(), forward(RID)) is NodeKind.FORWARD
    assert kind_of(stack(Action.DELETE), cleanup(RID)) is NodeKind.CLEANUP


# -- a forward node ----------------------------------------------------------------


def test_a_restricted_action_fails_the_stack_and_leaves_the_row_as_it_is() -> None:
    outcome = plan_forward(row(), ForwardDecision(Forward.UPDATE), goal(), restricted="update")
    assert outcome.then is Then.FAIL_STACK
    assert outcome.changes == NO_CHANGE, "the resource keeps its state"
    assert outcome.event == RowEvent("p1", "T", "UPDATE", Status.FAILED, "update is restricted for resource.")
    assert "ResourceActionRestricted: resources.r" in outcome.reason


def test_nothing_to_do_adopts_the_goals_template_and_dependencies_and_the_node_is_done() -> None:
    outcome = plan_forward(row(), ForwardDecision(Forward.NOTHING), goal())
    assert outcome.then is Then.NODE_DONE
    assert outcome.changes == ResourceChange(
        requires=frozenset({ResourceId(8)}),
        template_id=GOAL,
        deletion_policy="Delete",
        metadata={"m": 1},
    )
    assert outcome.event is None


def test_an_external_id_is_adopted_as_it_is_and_marked_external() -> None:
    outcome = plan_forward(row(physical_id=None), ForwardDecision(Forward.ADOPT), goal(external_id="ext-1"))
    assert outcome.then is Then.NODE_DONE
    assert outcome.changes.physical_id == "ext-1"
    assert outcome.changes.external is True
    assert outcome.changes.action is Action.ADOPT
    assert outcome.changes.status is Status.COMPLETE
    assert outcome.changes.properties == {"v": "new"}
    assert outcome.event == RowEvent("ext-1", "T", "ADOPT", Status.COMPLETE, "adopted")


def test_adopt_stack_data_keeps_the_physical_id_on_the_row_and_is_not_external() -> None:
    outcome = plan_forward(row(physical_id="p9"), ForwardDecision(Forward.ADOPT), goal())
    assert outcome.changes.physical_id == "p9"
    assert outcome.changes.external is False


def test_a_refused_nested_adoption_fails_the_row_and_the_stack() -> None:
    outcome = plan_forward(row(physical_id=None), ForwardDecision(Forward.ADOPT), goal(), refusal="not yours")
    assert outcome.then is Then.FAIL_STACK
    assert outcome.changes == ResourceChange(
        action=Action.ADOPT,
        status=Status.FAILED,
        status_reason="Resource ADOPT failed: not yours",
    )
    assert outcome.reason == "Resource ADOPT failed: not yours"
    assert outcome.event is not None
    assert outcome.event.status is Status.FAILED


def test_a_replacement_carries_the_goals_values_and_why() -> None:
    outcome = plan_forward(row(), ForwardDecision(Forward.REPLACE, why="v changed"), goal())
    assert outcome.then is Then.REPLACE
    assert outcome.changes == NO_CHANGE, "the old row is marked by the replacement itself"
    assert outcome.replacement == Replacement(
        type_name="T",
        properties={"v": "new"},
        requires=frozenset({ResourceId(8)}),
        deletion_policy="Delete",
        metadata={"m": 1},
        why="v changed",
    )


@pytest.mark.parametrize(
    ("kind", "action"), [(Forward.CREATE, JobAction.CREATE), (Forward.UPDATE, JobAction.UPDATE)]
)
def test_a_create_or_update_issues_its_job_without_adopting_the_template_yet(
    kind: Forward, action: JobAction
) -> None:
    outcome = plan_forward(row(), ForwardDecision(kind), goal(type_name="T2", deletion_policy="Retain"))
    assert outcome.then is Then.ISSUE
    assert outcome.changes == NO_CHANGE
    assert outcome.job == JobOrder(
        action=action,
        properties={"v": "new"},
        requires=frozenset({ResourceId(8)}),
        changes=ResourceChange(type="T2", deletion_policy="Retain", metadata={"m": 1}),
    )
    assert outcome.job.changes.template_id is UNSET, "adopted when the job succeeds"


def test_values_that_cannot_be_resolved_fail_the_create_or_the_update() -> None:
    assert unresolved(row(physical_id=None), "bad").changes.action is Action.CREATE
    outcome = unresolved(row(), "bad")
    assert outcome.then is Then.FAIL_STACK
    assert outcome.changes.action is Action.UPDATE
    assert outcome.reason == "Resource UPDATE failed: bad"


# -- a stack action's node -----------------------------------------------------------


def test_a_stack_check_records_a_missing_resource_and_its_dependents_are_checked_too() -> None:
    outcome = plan_action(stack(Action.CHECK), TRAVERSAL, row(physical_id=None), takes_snapshot=False)
    assert outcome.then is Then.NODE_DONE
    assert outcome.changes.status is Status.FAILED
    assert outcome.changes.action is Action.CHECK
    assert outcome.changes.traversal_id == TRAVERSAL, "the stack's check names it among its failures"
    assert outcome.event is not None
    assert outcome.event.physical_id is None


def test_a_suspend_of_a_resource_that_does_not_exist_is_done_without_a_job() -> None:
    outcome = plan_action(stack(Action.SUSPEND), TRAVERSAL, row(physical_id=None), takes_snapshot=False)
    assert outcome.then is Then.NODE_DONE
    assert outcome.changes == NO_CHANGE
    assert outcome.event is None


def test_a_snapshot_runs_a_job_only_on_types_that_take_their_own_snapshot() -> None:
    assert plan_action(stack(Action.SNAPSHOT), TRAVERSAL, row(), takes_snapshot=False).then is Then.NODE_DONE
    outcome = plan_action(stack(Action.SNAPSHOT), TRAVERSAL, row(), takes_snapshot=True)
    assert outcome.job is not None
    assert outcome.job.action is JobAction.SNAPSHOT


def test_a_stack_action_runs_on_the_resource_as_it_is() -> None:
    outcome = plan_action(stack(Action.SUSPEND), TRAVERSAL, row(), takes_snapshot=False)
    assert outcome.then is Then.ISSUE
    assert outcome.job == JobOrder(
        JobAction.SUSPEND, {"v": "old"}, frozenset({ResourceId(7)}), ResourceChange(job_template_id=APPLIED)
    )


# -- a cleanup node --------------------------------------------------------------------


def test_a_row_the_goal_keeps_is_done_untouched() -> None:
    outcome = plan_cleanup(row(), Cleanup.KEEP)
    assert outcome.then is Then.NODE_DONE
    assert not outcome.delete
    assert outcome.event is None


def test_a_row_adopted_through_external_id_is_let_go_of_never_deleted() -> None:
    outcome = plan_cleanup(row(external=True), Cleanup.LET_GO)
    assert outcome.then is Then.NODE_DONE
    assert outcome.delete
    assert outcome.job is None
    assert outcome.event is not None
    assert outcome.event.reason.endswith("it is left as it is")
    released = plan_cleanup(row(external=True), Cleanup.LET_GO, released=True)
    assert released.event is not None
    assert released.event.reason.endswith("its nested stack is a top-level stack again")


def test_a_retained_resource_is_forgotten_and_says_so_only_when_it_exists() -> None:
    outcome = plan_cleanup(row(), Cleanup.FORGET)
    assert outcome.delete
    assert outcome.then is Then.NODE_DONE
    assert outcome.event is not None
    assert outcome.event.reason == "Retained (deletion_policy: Retain)"
    assert plan_cleanup(row(physical_id=None), Cleanup.FORGET).event is None


def test_a_row_to_delete_gets_a_delete_job_with_what_deleting_needs() -> None:
    outcome = plan_cleanup(row(), Cleanup.DELETE)
    assert outcome.then is Then.ISSUE
    assert not outcome.delete
    assert outcome.job == JobOrder(JobAction.DELETE, {"v": "old"}, frozenset({ResourceId(7)}))


# -- a job issued, a traversal ended ------------------------------------------------------


def test_an_issued_job_is_recorded_on_the_row_with_its_node_traversal_and_goal() -> None:
    order = JobOrder(JobAction.UPDATE, {"v": "new"}, frozenset({ResourceId(8)}), ResourceChange(type="T2"))
    done = issued(stack(), TRAVERSAL, forward(RID), row(), order, "j9")
    assert done.changes == ResourceChange(
        action=Action.UPDATE,
        status=Status.IN_PROGRESS,
        status_reason="",
        current_job="j9",
        job_node=forward(RID),
        job_properties={"v": "new"},
        job_requires=frozenset({ResourceId(8)}),
        job_template_id=GOAL,
        traversal_id=TRAVERSAL,
        type="T2",
    )
    assert done.type_name == "T2", "the job runs as the goal's type"
    assert done.event == RowEvent("p1", "T2", "UPDATE", Status.IN_PROGRESS, "state changed")


def test_a_jobs_own_row_changes_win_over_the_defaults() -> None:
    order = JobOrder(JobAction.CHECK, {}, frozenset(), ResourceChange(job_template_id=APPLIED))
    done = issued(stack(Action.CHECK), TRAVERSAL, Node(3), row(), order, "j9")
    assert done.changes.job_template_id == APPLIED
    assert done.type_name == "T"


def test_a_traversal_ends_complete_and_a_delete_marks_the_stack_deleted() -> None:
    end = traversal_end(stack(), [])
    assert (end.status, end.reason, end.deleted) == (
        Status.COMPLETE,
        "Stack UPDATE completed successfully",
        False,
    )
    assert traversal_end(stack(Action.DELETE), []).deleted


def test_a_stack_check_that_found_failures_fails_naming_them() -> None:
    end = traversal_end(stack(Action.CHECK), [("r", "Resource CHECK failed: gone")])
    assert end.status is Status.FAILED
    assert "r: gone" in end.reason
    assert traversal_end(stack(Action.CHECK), []).status is Status.COMPLETE


def test_a_failed_create_or_update_rolls_back_unless_rollback_is_disabled_or_forced_back_on() -> None:
    assert rolls_back(stack(Action.CREATE))
    assert rolls_back(stack(Action.UPDATE))
    disabled = dataclasses.replace(stack(), disable_rollback=True)
    assert not rolls_back(disabled)
    assert rolls_back(disabled, forced=True)


def test_a_failed_heal_rollback_delete_or_stack_action_does_not_roll_back() -> None:
    heal = dataclasses.replace(stack(), previous_template_id=GOAL)  # the template it has
    assert not rolls_back(heal)
    assert not rolls_back(heal, forced=True)
    for action in (Action.ROLLBACK, Action.DELETE, Action.CHECK, Action.SUSPEND):
        assert not rolls_back(stack(action), forced=True), action


def test_a_rollback_restores_an_original_of_its_template_that_still_stands_not_a_third_copy() -> None:
    original = dataclasses.replace(row("p-old"), resource_id=ResourceId(1), replaced_by=ResourceId(2))
    replacement = dataclasses.replace(
        row("p-new", replaces=ResourceId(1), template_id=GOAL), resource_id=ResourceId(2)
    )

    assert originals_to_restore([original, replacement], APPLIED) == [(original, replacement)]
    assert originals_to_restore([original, replacement], GOAL) == [], "the original is of another template"
    for unusable in (
        dataclasses.replace(original, physical_id=None),  # never created, or gone
        dataclasses.replace(original, current_job="delete-1"),  # being deleted already
        dataclasses.replace(original, status=Status.FAILED),
    ):
        assert originals_to_restore([unusable, replacement], APPLIED) == []
    replaced_again = dataclasses.replace(replacement, replaced_by=ResourceId(3))
    assert originals_to_restore([original, replaced_again], APPLIED) == [], "restored by its own successor"
