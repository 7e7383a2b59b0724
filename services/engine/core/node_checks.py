"""What a node check does once its rows are read, and how a traversal ends. Pure.

Where it sits: the convergence shell (`services.engine.convergence.checks`)
reads a `CheckResource`'s stack, node and row, asks here whether the check
goes on (`superseded`, `moved_by_its_job`, `waits_for_job`) and which kind of
node it is (`kind_of`), then reads what that kind needs and gets a
`NodeOutcome` back: what is written on the row (or whether the row is
deleted), the resource's event, and what follows (`Then`): the node done, a
job issued on the row (`JobOrder`), a replacement (`Replacement`), or the
stack failed. The shell writes it (`convergence.checks.carry_out`), as it
does a job result's `core.results.ResultDecision`.

- forward (`plan_forward`), once `core.decide.decide_forward` chose: a
  restricted action fails the stack, the row untouched (Heat keeps its
  state); nothing to do adopts the goal's template on the row; an adoption
  takes the physical id (an `external_id`, or what `adopt_stack_data` set)
  unless the claim on a nested stack was refused; a replacement makes a new
  row; a create or update issues its job, the goal's type, deletion policy
  and metadata stored with it. Values that could not be resolved fail the
  row and the stack (`unresolved`).
- a stack action's node (`plan_action`): a stack check that finds no real
  resource records it missing and goes on; a snapshot of a type that takes
  none is done; otherwise the action's job runs on the resource as it is.
- cleanup (`plan_cleanup`), once `core.decide.decide_cleanup` chose: keep;
  let go of (the row forgotten, never deleted); forget (a Retain policy says
  so in an event); or delete, by a job.

`issued` is what a job being issued writes on its row, and `traversal_end`
what the end of a traversal's last sinks does to its stack. When an operation
fails, `rolls_back` says whether a rollback follows, and
`originals_to_restore` which replaced rows it makes current again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from services.engine.core.decide import (
    Cleanup,
    Forward,
    ForwardDecision,
    check_failure_reason,
    failure_reason,
    restricted_failure,
    restricted_reason,
)
from services.engine.core.drift import missing_marks
from services.engine.core.model import (
    STACK_ACTIONS,
    Action,
    Node,
    ResourceId,
    ResourceRow,
    StackRow,
    Status,
    TemplateId,
    TraversalId,
    is_forward,
)
from services.engine.core.nesting import is_nested
from services.engine.core.row_change import NO_CHANGE, ResourceChange, set_or
from shared.protocol import JobAction


class NodeKind(StrEnum):
    ACTION = "action"  # a node of a check, suspend, resume or snapshot
    FORWARD = "forward"  # converge the resource to the goal
    CLEANUP = "cleanup"  # a row the goal no longer has (or one replaced)


class Then(StrEnum):
    """What follows the row's write and the event."""

    NODE_DONE = "node_done"  # the node is done: its dependents go on
    ISSUE = "issue"  # a job is issued on the row (`NodeOutcome.job`)
    REPLACE = "replace"  # a new row replaces this one (`NodeOutcome.replacement`)
    FAIL_STACK = "fail_stack"  # the stack's operation failed (or rolls back)


@dataclass(frozen=True)
class RowEvent:
    """The resource's event (its stack and name are the row's)."""

    physical_id: str | None
    type_name: str
    action: str
    status: Status
    reason: str


@dataclass(frozen=True)
class JobOrder:
    """A job to issue on the row: what it applies, and what else the row stores with it."""

    action: JobAction
    properties: Mapping[str, Any]
    requires: frozenset[ResourceId]
    changes: ResourceChange = NO_CHANGE


@dataclass(frozen=True)
class Replacement:
    """A new row replacing the checked one, its create job issued at once."""

    type_name: str
    properties: Mapping[str, Any]
    requires: frozenset[ResourceId]
    deletion_policy: str
    metadata: Mapping[str, Any] | None  # None: the replaced row's, carried over
    why: str = ""


@dataclass(frozen=True)
class NodeOutcome:
    then: Then
    changes: ResourceChange = NO_CHANGE  # written on the row (empty: no write)
    delete: bool = False  # the row is deleted instead
    event: RowEvent | None = None
    job: JobOrder | None = None  # ISSUE
    replacement: Replacement | None = None  # REPLACE
    reason: str = ""  # FAIL_STACK: the stack's reason


@dataclass(frozen=True)
class ForwardGoal:
    """What the goal wants of a forward node's resource, its values resolved."""

    type_name: str
    deletion_policy: str
    external_id: str | None
    template_id: TemplateId
    properties: Mapping[str, Any]
    requires: frozenset[ResourceId]
    metadata: Mapping[str, Any]


NODE_DONE = NodeOutcome(Then.NODE_DONE)


# -- before deciding ------------------------------------------------------------


def superseded(stack: StackRow | None, traversal: TraversalId) -> bool:
    """Whether a check of `traversal` stops quietly: its stack is gone, runs a newer
    operation (how a newer operation preempts an older one without a lock), or
    `traversal` has ended (`runs`)."""
    return not runs(stack, traversal)


def runs(stack: StackRow | None, traversal: TraversalId) -> bool:
    """Whether `traversal` is still under way: its stack's current operation, not
    ended. Once an operation has failed (or completed), no check of it acts on a
    resource any more, even one sent before the end (a stall sweep's, a redelivery):
    a FAILED stack stays as it failed until the user's next operation."""
    return stack is not None and stack.current_traversal == traversal and stack.status is Status.IN_PROGRESS


def moved_by_its_job(row: ResourceRow, traversal: TraversalId, node: Node) -> bool:
    """Whether a check of `node` is a duplicate (a redelivery under another message id,
    or one sent again by recovery) that must do nothing: the node's own job is in
    flight on the row, or the node replaced the row already (only a forward node can,
    within its traversal) and the replacement's job finishes it. Checking again would
    send a second job, or make a second replacement."""
    if row.current_job is not None and row.traversal_id == traversal and row.job_node == node:
        return True
    return is_forward(node) and row.replaced_by is not None


def waits_for_job(row: ResourceRow, *, preempted: bool) -> bool:
    """Whether the check waits for the outcome of an older traversal's job still running
    on `row`. A nested job is not waited for (the new job preempts the child's
    operation); nor is a deployment's wait for its server's signal when the operation
    `preempted` it (a delete or rollback)."""
    return row.current_job is not None and not is_nested(row.type) and not preempted


def waiting_on(traversal: TraversalId, node: Node) -> ResourceChange:
    """The row change that makes the check of `node` the one woken by the row's job."""
    return ResourceChange(waiting_traversal=traversal, waiting_node=node)


def kind_of(stack: StackRow, node: Node) -> NodeKind:
    if stack.action in STACK_ACTIONS:
        return NodeKind.ACTION
    return NodeKind.FORWARD if is_forward(node) else NodeKind.CLEANUP


# -- what a node does ---------------------------------------------------------------


def failed(row: ResourceRow, action: Action, detail: str) -> NodeOutcome:
    """`row`'s `action` failed before any job ran (`detail` says why): the row and the
    stack are FAILED (or the stack rolls back)."""
    reason = failure_reason(action, detail)
    changes = ResourceChange(action=action, status=Status.FAILED, status_reason=reason)
    event = RowEvent(row.physical_id, row.type, action.value, Status.FAILED, reason)
    return NodeOutcome(Then.FAIL_STACK, changes, event=event, reason=reason)


def unresolved(row: ResourceRow, detail: str) -> NodeOutcome:
    """The goal's values for `row` could not be resolved: its create (or update) fails."""
    return failed(row, Action.UPDATE if row.exists else Action.CREATE, detail)


def adopted_id(row: ResourceRow, external_id: str | None) -> tuple[str | None, bool]:
    """The physical id an adoption gives `row`, and whether it is an `external_id` (else
    `adopt_stack_data` set it on the row already)."""
    external = not row.exists
    return (external_id if external else row.physical_id), external


def plan_forward(
    row: ResourceRow,
    decision: ForwardDecision,
    goal: ForwardGoal,
    *,
    restricted: str | None = None,
    refusal: str | None = None,
) -> NodeOutcome:
    """What a forward node does once `decide_forward` chose `decision`. `restricted`: the
    action the environment restricts (`decide.restricted_action`); `refusal`: why a
    nested stack's adoption was refused (`nested.claims.take_over`)."""
    if restricted is not None:
        reason = restricted_reason(restricted)
        event = RowEvent(row.physical_id, row.type, Action.UPDATE.value, Status.FAILED, reason)
        return NodeOutcome(Then.FAIL_STACK, event=event, reason=restricted_failure(row.name, restricted))
    adopt = ResourceChange(
        template_id=goal.template_id,
        deletion_policy=goal.deletion_policy,
        metadata=goal.metadata,  # stored with the row's other changes, never on its own
    )
    if decision.kind is Forward.NOTHING:
        return NodeOutcome(Then.NODE_DONE, ResourceChange(requires=goal.requires) | adopt)
    if decision.kind is Forward.ADOPT:
        if refusal is not None:
            return failed(row, Action.ADOPT, refusal)
        physical_id, external = adopted_id(row, goal.external_id)
        adopted = ResourceChange(
            physical_id=physical_id,
            action=Action.ADOPT,
            status=Status.COMPLETE,
            status_reason="",
            properties=goal.properties,
            requires=goal.requires,
            external=external,
        )
        changes = adopted | adopt
        event = RowEvent(physical_id, goal.type_name, Action.ADOPT.value, Status.COMPLETE, "adopted")
        return NodeOutcome(Then.NODE_DONE, changes, event=event)
    if decision.kind is Forward.REPLACE:
        replacement = Replacement(
            type_name=goal.type_name,
            properties=goal.properties,
            requires=goal.requires,
            deletion_policy=goal.deletion_policy,
            metadata=goal.metadata,
            why=decision.why,
        )
        return NodeOutcome(Then.REPLACE, replacement=replacement)
    # The template is adopted when the action succeeds (`results`), not now.
    job = JobOrder(
        action=JobAction.CREATE if decision.kind is Forward.CREATE else JobAction.UPDATE,
        properties=goal.properties,
        requires=goal.requires,
        changes=ResourceChange(
            type=goal.type_name, deletion_policy=goal.deletion_policy, metadata=goal.metadata
        ),
    )
    return NodeOutcome(Then.ISSUE, job=job)


def plan_action(
    stack: StackRow, traversal: TraversalId, row: ResourceRow, *, takes_snapshot: bool
) -> NodeOutcome:
    """A node of a check, suspend, resume or snapshot: run that action on the resource as
    it is. `takes_snapshot`: whether the row's type gets a job in a snapshot."""
    if not row.exists:
        if stack.action is not Action.CHECK:
            return NODE_DONE
        # A failed check does not stop its dependents' checks.
        reason = failure_reason(Action.CHECK, "the resource does not exist")
        changes = missing_marks(reason) | ResourceChange(traversal_id=traversal)
        event = RowEvent(None, row.type, Action.CHECK.value, Status.FAILED, reason)
        return NodeOutcome(Then.NODE_DONE, changes, event=event)
    action = JobAction(stack.action.value.lower())
    if action is JobAction.SNAPSHOT and not takes_snapshot:
        return NODE_DONE  # its document entry is the snapshot
    job = JobOrder(
        action, row.properties or {}, row.requires, ResourceChange(job_template_id=row.template_id)
    )
    return NodeOutcome(Then.ISSUE, job=job)


def plan_cleanup(row: ResourceRow, decision: Cleanup, *, released: bool = False) -> NodeOutcome:
    """What a cleanup node does once `decide_cleanup` chose `decision`. `released`: a
    nested stack let go of is a top-level stack again."""
    if decision is Cleanup.KEEP:
        return NODE_DONE
    if decision is Cleanup.LET_GO:
        what = "its nested stack is a top-level stack again" if released else "it is left as it is"
        reason = f"Let go (adopted through external_id, not managed by this stack): {what}"
        event = RowEvent(row.physical_id, row.type, Action.DELETE.value, Status.COMPLETE, reason)
        return NodeOutcome(Then.NODE_DONE, delete=True, event=event)
    if decision is Cleanup.FORGET:
        reason = "Retained (deletion_policy: Retain)"
        retained = RowEvent(row.physical_id, row.type, Action.DELETE.value, Status.COMPLETE, reason)
        return NodeOutcome(Then.NODE_DONE, delete=True, event=retained if row.exists else None)
    return NodeOutcome(Then.ISSUE, job=JobOrder(JobAction.DELETE, row.properties or {}, row.requires))


# -- a job issued, a traversal ended ---------------------------------------------------


@dataclass(frozen=True)
class Issued:
    changes: ResourceChange  # written on the row (compare-and-swap)
    event: RowEvent
    type_name: str  # the resource type the job runs as


def issued(
    stack: StackRow, traversal: TraversalId, node: Node, row: ResourceRow, job: JobOrder, job_id: str
) -> Issued:
    """What issuing `job` (as `job_id`, for `node`) writes on `row`: the job, what it
    applies, and the job's own row changes."""
    heat_action = Action(job.action.value.upper())
    type_name = set_or(job.changes.type, row.type)
    changes = (
        ResourceChange(
            action=heat_action,
            status=Status.IN_PROGRESS,
            status_reason="",
            current_job=job_id,
            job_node=node,
            job_properties=dict(job.properties),
            job_requires=job.requires,
            job_template_id=stack.current_template_id,
            traversal_id=traversal,
        )
        | job.changes
    )
    event = RowEvent(row.physical_id, type_name, heat_action.value, Status.IN_PROGRESS, "state changed")
    return Issued(changes, event, type_name)


@dataclass(frozen=True)
class TraversalEnd:
    status: Status  # COMPLETE, or FAILED: the stack fails (or rolls back) with `reason`
    reason: str
    deleted: bool = False  # a delete completed: the stack row says so


def rolls_back(stack: StackRow, *, forced: bool = False) -> bool:
    """Whether the failed operation of `stack` rolls back to the previous template: a
    create or update does, unless its rollback is disabled (and not `forced`); a heal,
    which converges to the template the stack already has, does not (rolling it back
    would only repeat it: healing retries it later, with backoff), nor does anything else
    (a rollback or delete that failed, a stack action)."""
    heal = stack.previous_template_id is not None and stack.previous_template_id == stack.current_template_id
    if stack.action not in (Action.CREATE, Action.UPDATE) or heal:
        return False
    return forced or not stack.disable_rollback


def originals_to_restore(
    rows: Sequence[ResourceRow], template_id: TemplateId
) -> list[tuple[ResourceRow, ResourceRow]]:
    """For a rollback to `template_id`: each (original, replacement) among the stack's
    `rows` where the original is made current again instead of a third copy created,
    in the rows' order. That is a replacement still current whose original it replaced
    is of `template_id`, still exists, is COMPLETE and is not being deleted already."""
    by_id = {r.resource_id: r for r in rows}
    restored = []
    for row in rows:
        original = by_id.get(row.replaces) if row.replaces is not None else None
        if (
            row.replaced_by is None
            and original is not None
            and original.replaced_by == row.resource_id
            and original.template_id == template_id
            and original.exists
            and original.current_job is None  # not being deleted already
            and original.status is Status.COMPLETE
        ):
            restored.append((original, row))
    return restored


def traversal_end(stack: StackRow, failed_checks: Sequence[tuple[str, str]]) -> TraversalEnd:
    """The last sinks of the stack's traversal are done: its operation is COMPLETE, but a
    stack check that found failures (`failed_checks`: name, reason) fails, naming them."""
    if stack.action is Action.CHECK and failed_checks:
        return TraversalEnd(Status.FAILED, check_failure_reason(failed_checks))
    reason = f"Stack {stack.action.value} completed successfully"
    return TraversalEnd(Status.COMPLETE, reason, deleted=stack.action is Action.DELETE)
