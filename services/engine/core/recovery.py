"""What to send again for work in flight that nothing is moving any more. Pure.

Where it sits: `services.engine.recovery` (the shell) reads, for each stack it
recovers, the rows with a job in flight and the not-done nodes of the stack's
current traversal, and asks `plan` which messages put that work back in
motion; it then builds and commits them (outbox) with a stack event saying
what was sent (`report`).

The database alone says what was in flight:
- a row with `current_job` set has a job nobody has answered: its worker's
  job is sent again (same job id, so the action's idempotency key is the
  same and nothing real is made twice), unless the worker already answered
  "in progress" and an observer was watching (`observing`): the same job
  would only be answered "in progress" again, with a result id the engine's
  inbox already holds, so an observer is asked again instead. A nested
  resource's job is run by an engine as an operation of its child stack:
  when the child is working on that very job, the child's own recovery moves
  it; otherwise the job is sent again (the child converges and answers);
- a node of the current traversal that is not done, whose predecessors are
  all done, and for which no row has a job in flight, lost its check: the
  check is sent again. A duplicate check is harmless: one of a done node
  stops, one that finds its node's job in flight stops, one that finds an
  older job on the row waits for it (services/engine/convergence/checks.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from services.engine.core.model import Action, Node, ResourceRow, TraversalId
from shared.protocol import JobAction

#: The row actions a job can be in flight for, and the job action each means.
JOB_ACTIONS = {
    Action.CREATE: JobAction.CREATE,
    Action.UPDATE: JobAction.UPDATE,
    Action.DELETE: JobAction.DELETE,
    Action.CHECK: JobAction.CHECK,
    Action.SUSPEND: JobAction.SUSPEND,
    Action.RESUME: JobAction.RESUME,
    Action.SNAPSHOT: JobAction.SNAPSHOT,
}


class Resend(StrEnum):
    JOB = "job"  # the worker's job again, same job id
    OBSERVE = "observe"  # an observer's watch of the job (its worker answered "in progress")
    NESTED_JOB = "nested_job"  # the nested resource's job again (an engine runs it on the child)
    NOTHING = "nothing"  # the child stack works on the job: its own recovery moves it


@dataclass(frozen=True)
class JobInFlight:
    """A row with a job in flight, and what else the database says about that job."""

    row: ResourceRow
    observing: bool = False  # its worker answered "in progress"; an observer was watching
    nested: bool = False  # a nested resource: an engine runs the job as a child stack operation
    child_answers: bool = False  # (nested) the child's operation in progress answers this job
    signalled: bool = False  # a wait condition: signals may have decided it meanwhile


@dataclass(frozen=True)
class JobResend:
    row: ResourceRow
    kind: Resend
    action: JobAction | None  # None: the row's action is not one a job runs (nothing is sent)
    settle: bool = False  # also evaluate the wait condition's signals again


@dataclass(frozen=True)
class PendingNode:
    """A node of a traversal that is not done, with the dependents it holds back."""

    node: Node
    direct: Sequence[Node]
    synced: Sequence[Node]


@dataclass(frozen=True)
class StackPlan:
    jobs: tuple[JobResend, ...]
    checks: tuple[Node, ...]  # nodes of the current traversal whose check is sent again
    start: bool = False  # the current traversal's graph is not stored: its start is sent again

    def counts(self) -> dict[str, int]:
        """How many messages of each kind are sent (kinds with none are left out)."""
        out: dict[str, int] = {}
        for job in self.jobs:
            if job.kind is not Resend.NOTHING and job.action is not None:
                out[job.kind.value] = out.get(job.kind.value, 0) + 1
        if self.checks:
            out["check"] = len(self.checks)
        if self.start:
            out["start"] = 1
        return out


def resend_job(job: JobInFlight) -> JobResend:
    """The message that puts one job in flight back in motion."""
    row = job.row
    action = JOB_ACTIONS.get(row.action)
    if job.nested:
        kind = Resend.NOTHING if job.child_answers else Resend.NESTED_JOB
        return JobResend(row, kind, action)
    if job.observing:
        return JobResend(row, Resend.OBSERVE, action, settle=job.signalled)
    return JobResend(row, Resend.JOB, action)


def ready_nodes(pending: Iterable[PendingNode]) -> list[Node]:
    """The not-done nodes whose predecessors are all done: those no not-done node
    holds back (a node is listed in its predecessors' direct or synced arrays).
    Linear in the number of not-done nodes."""
    pending = list(pending)
    held: set[Node] = set()
    for p in pending:
        held.update(p.direct)
        held.update(p.synced)
    return sorted(p.node for p in pending if p.node not in held)


def plan(
    *,
    traversal: TraversalId | None,
    pending: Iterable[PendingNode],
    jobs: Sequence[JobInFlight],
    graph_pending: bool = False,
) -> StackPlan:
    """What to send again for one stack. `pending` are the not-done nodes of its
    current `traversal` (none when no operation is in progress); `jobs` its rows
    with a job in flight. A ready node whose job is in flight (on its row, or on
    the row replacing it) is moved by that job, not by a new check. `graph_pending`:
    the update that made `traversal` the stack's has not stored its graph yet
    (`traversal.start_reserved`), so its start is what is sent."""
    busy = {j.row.job_node for j in jobs if j.row.traversal_id == traversal and j.row.job_node is not None}
    checks = tuple(n for n in ready_nodes(pending) if n not in busy) if traversal is not None else ()
    start = traversal is not None and graph_pending
    return StackPlan(tuple(resend_job(j) for j in jobs), () if start else checks, start)


def report(counts: dict[str, int], *, stalled_seconds: float | None, running: Sequence[str]) -> str:
    """The stack event recording a recovery. `stalled_seconds` None: at start-up."""
    names = {
        "job": "job",
        "observe": "observation",
        "nested_job": "nested stack job",
        "check": "check",
        "start": "traversal start",
    }
    sent = ", ".join(
        f"{n} {names[k]}{'' if n == 1 else 's'}" for k, n in sorted(counts.items()) if k in names
    )
    what = f"sent again: {sent}" if sent else "nothing to send again"
    if stalled_seconds is None:
        return f"Resumed after a restart; {what}"
    still = ", ".join(running) or "none"
    return f"No progress for {stalled_seconds:.0f}s; still in progress: {still}; {what}"
