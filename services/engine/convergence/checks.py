"""Checking a node: what a forward, cleanup or stack-action node does now.

Where it sits: `handling` passes each `CheckResource` to `check`. A check
whose traversal id is no longer the stack's stops quietly: that is how a
newer operation preempts an older one without a lock. A check that finds an
older job still running on its row waits on the row and is triggered again
when that job's outcome is recorded (`results`). Otherwise the node is
decided by `core.decide` and acted on:

- a forward node (`check_forward`) resolves the goal's values (a check whose
  values need the template pool is rolled back and handled again once they
  are resolved: `resolving.Resolved`), passes the gates (hooks, converge's
  observations: `gates`), and creates, updates, replaces (`replacement`),
  adopts or leaves the resource; a restricted update or replacement
  (`restricted_actions`) fails the stack without touching the row; a nested
  resource adopts the stack its `external_id` names only if
  `nested.claims` allows it;
- a cleanup node (`check_cleanup`) keeps, deletes, forgets (nothing real,
  or Retain) or lets go of (adopted through `external_id`: the row
  forgotten, a child stack released, never deleted) its row;
- a node of a check, suspend, resume or snapshot (`check_action`) runs that
  action on the resource as it is; in a stack `check`, a resource found
  missing is recorded so (no physical id, so the next update creates it
  again) and does not stop the others.

Jobs are issued through `issuing`; a node finished without a job goes to
`propagation.node_done`.
"""

from __future__ import annotations

import structlog

from services.engine.convergence.issuing import issue
from services.engine.convergence.propagation import fail, fail_stack, node_done
from services.engine.convergence.replacement import replace
from services.engine.convergence.shell import Shell, delete_row, update_row
from services.engine.core.decide import (
    Cleanup,
    Forward,
    decide_cleanup,
    decide_forward,
    failure_reason,
    restricted_action,
    restricted_failure,
    restricted_reason,
)
from services.engine.core.drift import missing_marks
from services.engine.core.model import (
    Action,
    Node,
    ResourceRow,
    StackId,
    StackRow,
    Status,
    TraversalId,
    is_forward,
)
from services.engine.core.nesting import facade_of, goal_digest, is_nested, with_digest
from services.engine.core.row_change import ResourceChange
from services.engine.deployments import preempted
from services.engine.effects import Effects
from services.engine.jobs import reference_data
from services.engine.messages import CheckResource
from services.engine.nested.claims import release, take_over
from services.engine.resolving import Resolved
from services.engine.snapshotting import takes_snapshots
from services.engine.store.tx import Tx
from services.engine.template import ResolutionError
from services.engine.traversal import STACK_ACTIONS
from shared.errors import ConflictError
from shared.protocol import JobAction

log = structlog.get_logger(__name__)


async def check(shell: Shell, tx: Tx, msg: CheckResource, fx: Effects, resolved: Resolved) -> None:
    stack = await tx.stack(StackId(msg.stack_id))
    traversal = TraversalId(msg.traversal_id)
    if stack is None or stack.current_traversal != traversal:
        log.debug("check_superseded", node=msg.node)
        return
    node = Node(msg.node)
    state = await tx.node(traversal, node)
    if state is None or state.done:
        return
    row = await tx.resource(msg.resource_id)
    if row is None:  # already cleaned up by an earlier traversal
        await node_done(tx, stack, traversal, node, fx)
        return
    if moved_by_its_job(row, traversal, node):
        return
    if row.current_job is not None and not is_nested(row.type) and not preempted(stack, row):
        # An older traversal's job is still running on this row: wait for its outcome.
        # (A nested job is not waited for: the new job preempts the child's operation;
        # nor is a deployment waiting for its server's signal, by a delete or rollback.)
        # The stack is read again after the row: had a newer update committed (and its
        # check registered on this row) since the stack was first read, this older
        # check must not take the row's one waiting slot from it.
        fresh = await tx.stack(stack.stack_id)
        if fresh is None or fresh.current_traversal != traversal:
            log.debug("check_superseded", node=msg.node)
            return
        if not await tx.update_resource(row, ResourceChange(waiting_traversal=traversal, waiting_node=node)):
            raise ConflictError(f"resource {row.resource_id} changed while checking")
        log.info("check_waits_for_running_job", resource=row.name, job_id=row.current_job)
        return
    if stack.action in STACK_ACTIONS:
        await check_action(shell, tx, stack, traversal, node, row, fx)
    elif is_forward(node):
        await check_forward(shell, tx, stack, traversal, node, row, fx, resolved)
    else:
        await check_cleanup(shell, tx, stack, traversal, node, row, fx)


async def check_forward(
    shell: Shell,
    tx: Tx,
    stack: StackRow,
    traversal: TraversalId,
    node: Node,
    row: ResourceRow,
    fx: Effects,
    resolved: Resolved,
) -> None:
    assert stack.current_template_id is not None
    definition = await shell.definitions.get(tx, stack, stack.current_template_id)
    goal = definition.resources[row.name]
    nested = is_nested(goal.type)
    cls = shell.types.get(goal.type)
    needed = await tx.current_resources(stack.stack_id, goal.requires)
    data = {n: reference_data(r, shell.types) for n, r in needed.items() if n in goal.references}
    requires = frozenset(r.resource_id for r in needed.values())
    try:
        properties, metadata = await resolved.goal_values(
            shell.templates, definition, row.name, data, stack.current_template_id
        )
    except ResolutionError as exc:
        failed = Action.UPDATE if row.exists else Action.CREATE
        await fail(shell, tx, stack, traversal, row, failed, str(exc), fx)
        return
    if nested:
        record = await tx.template(stack.current_template_id)
        assert record is not None
        facade = facade_of(metadata, goal.deletion_policy.value, goal.update_policy)
        properties = with_digest(properties, goal_digest(record.environment, record.files, facade))
    decision = decide_forward(
        row,
        type_name=goal.type,
        schema=cls.properties if cls is not None else None,
        properties=properties,
        external_id=goal.external_id,
        nested=nested,
        replaced_on_update=cls is not None and cls.replaced_on_update,
        goal_template_id=stack.current_template_id,
    )
    log.debug("check", resource=row.name, decision=decision.kind.value, why=decision.why or None)
    gates = (tx, stack, traversal, node, row, goal, decision.kind, definition.environment, fx)
    if not await shell.gates.before_forward(*gates):
        return  # paused at a hook, or observing first: what opens the gate checks again
    restricted = restricted_action(decision.kind, definition.environment.restricted_actions_for(row.name))
    if restricted is not None:
        # Heat: the resource keeps its state; its event and the stack say why.
        log.info("action_restricted", resource=row.name, action=restricted)
        reason = restricted_reason(restricted)
        fx.event(stack.stack_id, row.name, row.physical_id, row.type, "UPDATE", "FAILED", reason)
        await fail_stack(shell, tx, stack, traversal, restricted_failure(row.name, restricted), fx)
        return
    adopt = ResourceChange(
        template_id=stack.current_template_id,
        deletion_policy=goal.deletion_policy.value,
        metadata=metadata,  # stored with the row's other changes, never on its own
    )
    if decision.kind is Forward.NOTHING:
        await update_row(tx, row, ResourceChange(requires=requires) | adopt)
        await node_done(tx, stack, traversal, node, fx)
    elif decision.kind is Forward.ADOPT:
        external = not row.exists  # an external_id; else adopt_stack_data set the physical id
        physical_id = goal.external_id if external else row.physical_id
        refusal = (
            await take_over(
                tx,
                stack,
                row,
                physical_id,
                external=external,
                max_depth=shell.limits.max_nested_depth,
                quotas=shell.quotas,
            )
            if nested
            else None
        )
        if refusal is not None:
            await fail(shell, tx, stack, traversal, row, Action.ADOPT, refusal, fx)
            return
        adopted = ResourceChange(
            physical_id=physical_id,
            action=Action.ADOPT,
            status=Status.COMPLETE,
            status_reason="",
            properties=properties,
            requires=requires,
            external=external,
        )
        await update_row(tx, row, adopted | adopt)
        fx.event(stack.stack_id, row.name, physical_id, goal.type, "ADOPT", "COMPLETE", "adopted")
        await node_done(tx, stack, traversal, node, fx)
    elif decision.kind is Forward.REPLACE:
        await replace(
            shell,
            tx,
            stack,
            traversal,
            node,
            row,
            goal.type,
            properties,
            requires,
            adopt,
            fx,
            why=decision.why,
        )
    else:
        action = JobAction.CREATE if decision.kind is Forward.CREATE else JobAction.UPDATE
        # The template is adopted when the action succeeds (see `results`), not now.
        await issue(
            shell,
            tx,
            stack,
            traversal,
            node,
            row,
            action,
            properties,
            requires,
            fx,
            change=ResourceChange(type=goal.type, deletion_policy=adopt.deletion_policy, metadata=metadata),
        )


async def check_action(
    shell: Shell, tx: Tx, stack: StackRow, traversal: TraversalId, node: Node, row: ResourceRow, fx: Effects
) -> None:
    """A node of a check, suspend or resume: run that action on the resource as it is."""
    if not row.exists:
        if stack.action is Action.CHECK:  # a failed check does not stop its dependents' checks
            reason = failure_reason(Action.CHECK, "the resource does not exist")
            await update_row(tx, row, missing_marks(reason) | ResourceChange(traversal_id=traversal))
            fx.event(stack.stack_id, row.name, None, row.type, "CHECK", "FAILED", reason)
        await node_done(tx, stack, traversal, node, fx)
        return
    action = JobAction(stack.action.value.lower())
    if action is JobAction.SNAPSHOT and not takes_snapshots(shell.types.get(row.type)):
        await node_done(tx, stack, traversal, node, fx)  # its document entry is the snapshot
        return
    properties = row.properties or {}
    change = ResourceChange(job_template_id=row.template_id)
    await issue(shell, tx, stack, traversal, node, row, action, properties, row.requires, fx, change=change)


async def check_cleanup(
    shell: Shell, tx: Tx, stack: StackRow, traversal: TraversalId, node: Node, row: ResourceRow, fx: Effects
) -> None:
    decision = decide_cleanup(row, current_template_id=stack.current_template_id)
    log.debug("cleanup", resource=row.name, resource_id=row.resource_id, decision=decision.value)
    if not await shell.gates.before_cleanup(tx, stack, traversal, node, row, decision, fx):
        return  # paused at a pre-delete hook until it is cleared
    if decision is Cleanup.KEEP:
        await node_done(tx, stack, traversal, node, fx)
    elif decision is Cleanup.LET_GO:
        released = is_nested(row.type) and await release(tx, stack, row)
        await delete_row(tx, row)
        what = "its nested stack is a top-level stack again" if released else "it is left as it is"
        reason = f"Let go (adopted through external_id, not managed by this stack): {what}"
        fx.event(stack.stack_id, row.name, row.physical_id, row.type, "DELETE", "COMPLETE", reason)
        await node_done(tx, stack, traversal, node, fx)
    elif decision is Cleanup.FORGET:
        await delete_row(tx, row)
        if row.exists:
            reason = "Retained (deletion_policy: Retain)"
            fx.event(stack.stack_id, row.name, row.physical_id, row.type, "DELETE", "COMPLETE", reason)
        await node_done(tx, stack, traversal, node, fx)
    else:
        properties = row.properties or {}
        await issue(shell, tx, stack, traversal, node, row, JobAction.DELETE, properties, row.requires, fx)


def moved_by_its_job(row: ResourceRow, traversal: TraversalId, node: Node) -> bool:
    """Whether a check of `node` is a duplicate (a redelivery under another message id,
    or one sent again by recovery) that must do nothing: the node's own job is in
    flight on the row, or the node replaced the row already (only a forward node can,
    within its traversal) and the replacement's job finishes it. Checking again would
    send a second job, or make a second replacement."""
    if row.current_job is not None and row.traversal_id == traversal and row.job_node == node:
        log.debug("check_duplicate", node=node, job_id=row.current_job)
        return True
    if is_forward(node) and row.replaced_by is not None:
        log.debug("check_duplicate", node=node, replaced_by=row.replaced_by)
        return True
    return False
