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
- a node of a check, suspend, resume or snapshot (`core.node_checks.plan_action`) runs that
  action on the resource as it is; in a stack `check`, a resource found
  missing is recorded so (no physical id, so the next update creates it
  again) and does not stop the others.

What each branch does is decided by `core.node_checks` (whether the check
goes on, and a `NodeOutcome` for each kind of node) after the shell read what
it needs; `carry_out` writes the outcome: the row, the event, then the node
done (`propagation.node_done`), a job issued (`issuing`), a replacement
(`replacement`) or the stack failed.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from services.engine.convergence.issuing import issue
from services.engine.convergence.propagation import fail_stack, node_done
from services.engine.convergence.replacement import replace
from services.engine.convergence.shell import Check, Shell, delete_row, update_row
from services.engine.core.decide import Cleanup, Forward, decide_cleanup, decide_forward, restricted_action
from services.engine.core.model import Node, StackId, TraversalId
from services.engine.core.nesting import facade_of, goal_digest, is_nested, with_digest
from services.engine.core.node_checks import (
    ForwardGoal,
    NodeKind,
    NodeOutcome,
    Then,
    adopted_id,
    kind_of,
    moved_by_its_job,
    plan_action,
    plan_cleanup,
    plan_forward,
    superseded,
    unresolved,
    waiting_on,
    waits_for_job,
)
from services.engine.deployments import preempted
from services.engine.effects import Effects
from services.engine.jobs import reference_data
from services.engine.messages import CheckResource
from services.engine.nested.claims import release, take_over
from services.engine.resolving import Resolved
from services.engine.snapshotting import takes_snapshots
from services.engine.store.tx import Tx
from services.engine.template import ResolutionError
from shared.errors import ConflictError

log = structlog.get_logger(__name__)


async def check(shell: Shell, tx: Tx, msg: CheckResource, fx: Effects, resolved: Resolved) -> None:
    stack = await tx.stack(StackId(msg.stack_id))
    traversal = TraversalId(msg.traversal_id)
    if stack is None or superseded(stack, traversal):
        log.debug("check_superseded", node=msg.node)
        return
    node = Node(msg.node)
    state = await tx.node(traversal, node)
    if state is None or state.done:
        return
    row = await tx.resource(msg.resource_id)
    if row is None:  # already cleaned up by an earlier traversal
        node_done(tx, stack, traversal, node, fx)
        return
    if moved_by_its_job(row, traversal, node):
        log.debug("check_duplicate", node=node, job_id=row.current_job, replaced_by=row.replaced_by)
        return
    if waits_for_job(row, preempted=preempted(stack, row)):
        # The stack is read again after the row: had a newer update committed (and its
        # check registered on this row) since the stack was first read, this older
        # check must not take the row's one waiting slot from it.
        if superseded(await tx.stack(stack.stack_id), traversal):
            log.debug("check_superseded", node=msg.node)
            return
        if not await tx.update_resource(row, waiting_on(traversal, node)):
            raise ConflictError(f"resource {row.resource_id} changed while checking")
        log.info("check_waits_for_running_job", resource=row.name, job_id=row.current_job)
        return
    at = Check(shell=shell, tx=tx, stack=stack, traversal=traversal, node=node, row=row, fx=fx)
    kind = kind_of(stack, node)
    if kind is NodeKind.ACTION:
        takes_snapshot = takes_snapshots(shell.deps.types.get(row.type))
        await carry_out(at, plan_action(stack, traversal, row, takes_snapshot=takes_snapshot))
    elif kind is NodeKind.FORWARD:
        await check_forward(at, resolved)
    else:
        await check_cleanup(at)


async def read_ahead(shell: Shell, tx: Tx, messages: Sequence[CheckResource]) -> None:
    """Read in one statement the references the forward checks among `messages` will
    read (`check_forward`: of the current rows their goal requires), once a batch's own
    rows are prefetched."""
    wanted: dict[StackId, set[str]] = {}
    for msg in messages:
        stack = await tx.stack(StackId(msg.stack_id))
        row = await tx.resource(msg.resource_id)
        if stack is None or row is None or stack.current_template_id is None:
            continue
        if kind_of(stack, Node(msg.node)) is not NodeKind.FORWARD:
            continue
        definition = await shell.deps.definitions.get(tx, stack, stack.current_template_id)
        goal = definition.resources.get(row.name)
        if goal is not None and goal.requires:
            wanted.setdefault(stack.stack_id, set()).update(goal.requires)
    if wanted:
        await tx.read_references(wanted)


async def check_forward(at: Check, resolved: Resolved) -> None:
    """Read the goal and resolve its values, pass the gates, claim an adopted nested
    stack; `core.node_checks.plan_forward` decides the rest."""
    shell, tx, stack, row = at.shell, at.tx, at.stack, at.row
    deps = shell.deps
    template_id = stack.current_template_id
    assert template_id is not None
    definition = await deps.definitions.get(tx, stack, template_id)
    goal = definition.resources[row.name]
    nested = is_nested(goal.type)
    cls = deps.types.get(goal.type)
    needed = await tx.references(stack.stack_id, goal.requires)
    data = {n: reference_data(r, deps.types) for n, r in needed.items() if n in goal.references}
    requires = frozenset(r.resource_id for r in needed.values())
    try:
        properties, metadata = await resolved.goal_values(
            deps.templates, definition, row.name, data, template_id
        )
    except ResolutionError as exc:
        await carry_out(at, unresolved(row, str(exc)))
        return
    if nested:
        record = await tx.template(template_id)
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
        goal_template_id=template_id,
    )
    log.debug("check", resource=row.name, decision=decision.kind.value, why=decision.why or None)
    gates = (tx, stack, at.traversal, at.node, row, goal, decision.kind, definition.environment, at.fx)
    if not await shell.gates.before_forward(*gates):
        return  # paused at a hook, or observing first: what opens the gate checks again
    restricted = restricted_action(decision.kind, definition.environment.restricted_actions_for(row.name))
    if restricted is not None:  # Heat: the resource keeps its state; its event and the stack say why
        log.info("action_restricted", resource=row.name, action=restricted)
    refusal = None
    if restricted is None and decision.kind is Forward.ADOPT and nested:
        physical_id, external = adopted_id(row, goal.external_id)
        limit = deps.limits.max_nested_depth
        refusal = await take_over(
            tx, stack, row, physical_id, external=external, max_depth=limit, quotas=deps.quotas
        )
    wanted = ForwardGoal(
        type_name=goal.type,
        deletion_policy=goal.deletion_policy.value,
        external_id=goal.external_id,
        template_id=template_id,
        properties=properties,
        requires=requires,
        metadata=metadata,
    )
    await carry_out(at, plan_forward(row, decision, wanted, restricted=restricted, refusal=refusal))


async def check_cleanup(at: Check) -> None:
    """Pass the pre-delete gate and let go of an adopted nested stack;
    `core.node_checks.plan_cleanup` decides the rest."""
    row = at.row
    decision = decide_cleanup(row, current_template_id=at.stack.current_template_id)
    log.debug("cleanup", resource=row.name, resource_id=row.resource_id, decision=decision.value)
    gate = (at.tx, at.stack, at.traversal, at.node, row, decision, at.fx)
    if not await at.shell.gates.before_cleanup(*gate):
        return  # paused at a pre-delete hook until it is cleared
    released = decision is Cleanup.LET_GO and is_nested(row.type) and await release(at.tx, at.stack, row)
    await carry_out(at, plan_cleanup(row, decision, released=released))


async def carry_out(at: Check, outcome: NodeOutcome) -> None:
    """Write what `core.node_checks` decided for the checked node: the row (compare-and-swap)
    or its deletion, the resource's event, then what follows."""
    tx, stack, row, fx = at.tx, at.stack, at.row, at.fx
    if outcome.delete:
        await delete_row(tx, row)
    elif not outcome.changes.empty:
        await update_row(tx, row, outcome.changes)
    if outcome.event is not None:
        e = outcome.event
        fx.event(stack.stack_id, row.name, e.physical_id, e.type_name, e.action, e.status.value, e.reason)
    if outcome.then is Then.NODE_DONE:
        node_done(tx, stack, at.traversal, at.node, fx)
    elif outcome.then is Then.ISSUE:
        assert outcome.job is not None
        await issue(at, outcome.job)
    elif outcome.then is Then.REPLACE:
        assert outcome.replacement is not None
        await replace(at, outcome.replacement)
    else:
        await fail_stack(at.shell, tx, stack, at.traversal, outcome.reason, fx)
