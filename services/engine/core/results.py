"""What a job's result does to its row, its node and its stack. Pure.

Where it sits: the engine's shell (`services.engine.convergence.results`)
reads the row the job ran on and its stack, calls `decide_result`, and does
what the `ResultDecision` says: write the row (or delete it), record the
event, then what follows (`Then`). Only a result of the job the row is still
running gets here; a stale one is reaped (`services.engine.convergence.reaping`).

- IN_PROGRESS (an asynchronous action): the row records what is known and
  that an observer is asked for the end (so that recovery asks an observer
  again, not the worker); nothing else follows yet.
- REPLACE, from a job of the stack's current traversal: the row is done
  (UPDATE COMPLETE) and replaced by a new row (`Then.REPLACE`) made with
  what the job would have applied (`core.node_checks.Replacement`).
- FAILED, GONE, or a REPLACE of a superseded traversal: the row keeps what
  deleting the real resource needs (`decide.properties_after_failure`); GONE
  records it missing (`drift.missing_marks`), so the next update creates it
  again. A stack check goes on to the node's dependents; any other current
  operation fails (or rolls back); an older traversal's failure only wakes
  the check waiting on the row.
- DELETE of a row the current traversal still wants (e.g. a rollback): the
  row stays, empty, so its waiting check creates the resource again.
- DELETE otherwise: the row is deleted.
- Success: the row takes what the job applied (properties, dependencies,
  template; a create or update replaces the attributes, any other action
  merges what it reports).

A current job's node is done; a superseded traversal's job wakes the check
waiting on its row, if any.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from services.engine.core.decide import failure_reason, properties_after_failure
from services.engine.core.drift import missing_marks
from services.engine.core.model import Action, ResourceRow, StackRow, Status
from services.engine.core.node_checks import Replacement, runs
from services.engine.core.row_change import NO_CHANGE, ResourceChange
from shared.protocol import JobAction, JobOutcome, JobResult

#: Actions whose result replaces the row's attributes (any other merges them).
CHANGES = frozenset({JobAction.CREATE, JobAction.UPDATE})

#: The row forgets its job: none running, nobody waiting, nothing observed.
JOB_DONE = ResourceChange(
    current_job=None,
    job_node=None,
    job_properties=None,
    job_requires=None,
    job_template_id=None,
    waiting_traversal=None,
    waiting_node=None,
    observing_job=None,
)


class Then(StrEnum):
    """What follows the row's write and the event."""

    OBSERVE = "observe"  # ask an observer for the end of the job in flight
    REPLACE = "replace"  # a new row replaces this one (its create job issued)
    NODE_DONE = "node_done"  # the job's node is done: its dependents go on
    FAIL_STACK = "fail_stack"  # the stack's operation failed (or rolls back)
    WAKE_WAITING = "wake_waiting"  # a superseded job: the check waiting on the row goes on


@dataclass(frozen=True)
class ResultEvent:
    """The resource's event (its stack, name and type are the row's)."""

    physical_id: str | None
    action: Action
    status: Status
    reason: str


@dataclass(frozen=True)
class ResultDecision:
    then: Then
    changes: ResourceChange  # written on the row (nothing when `delete`)
    delete: bool = False  # the row is deleted instead
    event: ResultEvent | None = None
    reason: str = ""  # FAIL_STACK: the stack's reason; REPLACE: why
    observed: str | None = None  # OBSERVE: the physical id the observer watches
    replacement: Replacement | None = None  # REPLACE: the new row, as the job would have applied it


def is_current(stack: StackRow | None, row: ResourceRow) -> bool:
    """Whether the job on `row` belongs to its stack's current traversal, still under
    way: a job that outlived its operation's failure records its outcome on the row
    and nothing follows (no dependents, no replacement)."""
    return stack is not None and row.traversal_id is not None and runs(stack, row.traversal_id)


def asks_still_wanted(result: JobResult) -> bool:
    """Whether deciding `result` needs to know if the current traversal still wants the
    row (a forward node of it not done yet): only a successful delete does."""
    return result.action is JobAction.DELETE and result.outcome is JobOutcome.COMPLETE


def decide_result(
    row: ResourceRow, result: JobResult, stack: StackRow | None, *, still_wanted: bool = False
) -> ResultDecision:
    """What the result of the job `row` runs (`row.current_job` is `result.job_id`)
    does. `stack`: the row's stack (None once deleted); `still_wanted`: whether the
    stack's current traversal has a forward node of the row still to do (asked only
    when `asks_still_wanted`)."""
    current = is_current(stack, row)
    action = Action(result.action.value.upper())
    if result.outcome is JobOutcome.IN_PROGRESS:
        physical_id = result.physical_id or row.physical_id
        changes = ResourceChange(physical_id=physical_id, observing_job=row.current_job)
        return ResultDecision(Then.OBSERVE, changes, observed=physical_id)
    if result.outcome is JobOutcome.REPLACE and current:
        changes = ResourceChange(action=Action.UPDATE, status=Status.COMPLETE) | JOB_DONE
        replacement = Replacement(
            type_name=row.type,
            properties=row.job_properties or {},
            requires=row.job_requires or frozenset(),
            deletion_policy=row.deletion_policy,
            metadata=None,  # the replaced row's
            why=result.reason,
        )
        return ResultDecision(Then.REPLACE, changes, reason=result.reason, replacement=replacement)
    if result.outcome in (JobOutcome.FAILED, JobOutcome.REPLACE, JobOutcome.GONE):
        return _failed(row, result, stack, action, current=current)
    if result.action is JobAction.DELETE and still_wanted:
        emptied = ResourceChange(
            physical_id=None,
            action=Action.DELETE,
            status=Status.COMPLETE,
            status_reason="",
            properties=None,
            attributes={},
        )
        return _done(emptied | JOB_DONE, result, action, current=current)
    if result.action is JobAction.DELETE:
        return _done(NO_CHANGE, result, action, current=current, delete=True)
    # a check refreshes attributes; suspend and resume may report none
    merged = result.attributes if result.action in CHANGES else {**row.attributes, **result.attributes}
    applied = ResourceChange(
        status=Status.COMPLETE,
        status_reason="state changed",
        physical_id=result.physical_id,
        attributes=merged,
        properties=row.job_properties,
        requires=row.job_requires or frozenset(),
        template_id=row.job_template_id or row.template_id,
    )
    return _done(applied | JOB_DONE, result, action, current=current)


def _failed(
    row: ResourceRow, result: JobResult, stack: StackRow | None, action: Action, *, current: bool
) -> ResultDecision:
    gone = result.outcome is JobOutcome.GONE
    detail = result.reason or ("the resource no longer exists" if gone else "replacement needed")
    reason = failure_reason(action, detail)
    # A check that finds the resource gone records it missing, so the next update
    # (or heal) creates it again. Whatever failed, the row keeps the properties
    # needed to delete what the action made.
    outcome = missing_marks(reason) if gone else ResourceChange(status=Status.FAILED, status_reason=reason)
    kept = ResourceChange(
        physical_id=None if gone else result.physical_id or row.physical_id,
        properties=properties_after_failure(action, row.properties, row.job_properties),
    )
    changes = kept | outcome | JOB_DONE
    event = ResultEvent(result.physical_id or row.physical_id, action, Status.FAILED, reason)
    if current and stack is not None and stack.action is Action.CHECK:
        return ResultDecision(Then.NODE_DONE, changes, event=event)  # dependents are checked too
    if current:
        return ResultDecision(Then.FAIL_STACK, changes, event=event, reason=reason)
    return ResultDecision(Then.WAKE_WAITING, changes, event=event)


def _done(
    changes: ResourceChange, result: JobResult, action: Action, *, current: bool, delete: bool = False
) -> ResultDecision:
    event = ResultEvent(result.physical_id, action, Status.COMPLETE, "state changed")
    then = Then.NODE_DONE if current else Then.WAKE_WAITING
    return ResultDecision(then, changes, delete=delete, event=event)
