"""Which message recovery sends again for each row with a job in flight and for each
node of the current traversal, and how the recovery is reported. Pure."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from services.engine.core.model import (
    Action,
    Node,
    ResourceId,
    ResourceRow,
    StackId,
    Status,
    TraversalId,
    cleanup,
    forward,
)
from services.engine.core.recovery import (
    JobInFlight,
    PendingNode,
    Resend,
    plan,
    ready_nodes,
    report,
    resend_job,
)
from shared.protocol import JobAction

STACK = StackId(uuid.uuid4())
NOW = TraversalId(uuid.uuid4())
OLDER = TraversalId(uuid.uuid4())


def job_row(
    resource_id: int,
    *,
    action: Action = Action.CREATE,
    traversal: TraversalId = NOW,
    node: Node | None = None,
    **extra: Any,
) -> ResourceRow:
    return ResourceRow(
        ResourceId(resource_id),
        STACK,
        f"r{resource_id}",
        "T",
        None,
        action,
        Status.IN_PROGRESS,
        current_job=f"job-{resource_id}",
        job_node=node if node is not None else forward(resource_id),
        job_properties={"value": resource_id},
        traversal_id=traversal,
        **extra,
    )


def pending(node: Node, *direct: Node, synced: tuple[Node, ...] = ()) -> PendingNode:
    return PendingNode(node, direct, synced)


# -- which message for a job in flight --------------------------------------------


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        (Action.CREATE, JobAction.CREATE),
        (Action.UPDATE, JobAction.UPDATE),
        (Action.DELETE, JobAction.DELETE),
        (Action.CHECK, JobAction.CHECK),
        (Action.SUSPEND, JobAction.SUSPEND),
        (Action.RESUME, JobAction.RESUME),
    ],
)
def test_a_job_nobody_answered_is_sent_again_as_the_same_action(action: Action, expected: JobAction) -> None:
    decided = resend_job(JobInFlight(job_row(1, action=action)))
    assert (decided.kind, decided.action, decided.settle) == (Resend.JOB, expected, False)


def test_a_job_whose_worker_answered_in_progress_is_watched_again_not_run_again() -> None:
    decided = resend_job(JobInFlight(job_row(1), observing=True))
    assert (decided.kind, decided.action) == (Resend.OBSERVE, JobAction.CREATE)


def test_a_waiting_wait_condition_is_watched_again_and_its_signals_evaluated_again() -> None:
    decided = resend_job(JobInFlight(job_row(1), observing=True, signalled=True))
    assert (decided.kind, decided.settle) == (Resend.OBSERVE, True)


def test_a_wait_condition_whose_worker_never_answered_is_run_again() -> None:
    decided = resend_job(JobInFlight(job_row(1), signalled=True))
    assert (decided.kind, decided.settle) == (Resend.JOB, False)


def test_a_nested_job_its_child_works_on_is_left_to_the_childs_own_recovery() -> None:
    decided = resend_job(JobInFlight(job_row(1, action=Action.UPDATE), nested=True, child_answers=True))
    assert decided.kind is Resend.NOTHING


def test_a_nested_job_no_child_works_on_is_sent_again_to_an_engine() -> None:
    decided = resend_job(JobInFlight(job_row(1, action=Action.DELETE), nested=True, observing=True))
    assert (decided.kind, decided.action) == (Resend.NESTED_JOB, JobAction.DELETE)


def test_a_row_action_no_job_runs_sends_nothing() -> None:
    decided = resend_job(JobInFlight(job_row(1, action=Action.ROLLBACK)))
    assert decided.action is None
    assert (
        plan(traversal=None, pending=[], jobs=[JobInFlight(job_row(1, action=Action.ADOPT))]).counts() == {}
    )


# -- which nodes are checked again ----------------------------------------------


def test_ready_nodes_are_the_not_done_nodes_no_not_done_node_holds_back() -> None:
    a, b, c, d = forward(1), forward(2), forward(3), forward(4)
    # a -> b (direct), a and c -> d (sync point); c and a not done, b and d held back.
    nodes = [pending(a, b, synced=(d,)), pending(b), pending(c, synced=(d,)), pending(d)]
    assert ready_nodes(nodes) == sorted([a, c])


def test_a_sync_point_whose_predecessors_are_done_is_ready() -> None:
    assert ready_nodes([pending(forward(4))]) == [forward(4)]


def test_a_ready_node_without_a_job_is_checked_again() -> None:
    decided = plan(traversal=NOW, pending=[pending(forward(1), forward(2)), pending(forward(2))], jobs=[])
    assert decided.checks == (forward(1),)


def test_a_ready_node_whose_job_is_in_flight_is_moved_by_the_job_not_by_a_check() -> None:
    jobs = [JobInFlight(job_row(1))]
    decided = plan(traversal=NOW, pending=[pending(forward(1))], jobs=jobs)
    assert decided.checks == ()
    assert [j.kind for j in decided.jobs] == [Resend.JOB]


def test_a_node_whose_job_runs_on_the_row_replacing_it_gets_no_check() -> None:
    # Row 7 replaces row 1: the creation of 7 is the job of row 1's forward node.
    jobs = [JobInFlight(job_row(7, node=forward(1), replaces=ResourceId(1)))]
    assert plan(traversal=NOW, pending=[pending(forward(1))], jobs=jobs).checks == ()


def test_a_node_whose_row_runs_an_older_operations_job_is_checked_again_to_wait_for_it() -> None:
    jobs = [JobInFlight(job_row(1, traversal=OLDER, node=cleanup(1), action=Action.DELETE))]
    decided = plan(traversal=NOW, pending=[pending(forward(1))], jobs=jobs)
    assert decided.checks == (forward(1),)
    assert [(j.kind, j.action) for j in decided.jobs] == [(Resend.JOB, JobAction.DELETE)]


def test_a_stack_not_in_progress_gets_its_jobs_only() -> None:
    jobs = [JobInFlight(job_row(1)), JobInFlight(job_row(2), observing=True)]
    decided = plan(traversal=None, pending=[pending(forward(3))], jobs=jobs)
    assert decided.checks == ()
    assert [j.kind for j in decided.jobs] == [Resend.JOB, Resend.OBSERVE]
    assert decided.counts() == {"job": 1, "observe": 1}


# -- the report ---------------------------------------------------------------------


def test_the_report_of_a_stalled_stack_names_what_runs_and_what_was_sent() -> None:
    counts = {"job": 2, "observe": 1, "check": 1}
    assert (
        report(counts, stalled_seconds=300, running=["a", "b"])
        == "No progress for 300s; still in progress: a, b; sent again: 1 check, 2 jobs, 1 observation"
    )


def test_the_report_at_start_up_says_the_work_was_resumed() -> None:
    assert report({"nested_job": 1}, stalled_seconds=None, running=[]) == (
        "Resumed after a restart; sent again: 1 nested stack job"
    )
    assert report({}, stalled_seconds=5, running=[]) == (
        "No progress for 5s; still in progress: none; nothing to send again"
    )
