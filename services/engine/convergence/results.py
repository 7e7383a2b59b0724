"""Recording a job's result: the shell around `core.results.decide_result`.

Where it sits: `handling` passes each `JobResult` to `result`. A result of a
job the row no longer runs (a late replay, a superseded job) is stale and
goes to `reaping`. Otherwise the shell reads what the decision needs (the
row, its stack, whether the current traversal still wants a deleted row),
records what a resource's snapshot kept (`snapshotting.job_ended`), and does
what `decide_result` returns: the row written (compare-and-swap) or deleted,
the resource's event, then what follows: an observer asked for the end of an
asynchronous action (and a wait condition settled at once if its signals are
all in), a replacement (`replacement`), the node done (`propagation`), the
stack failed, or the check waiting on the row woken.
"""

from __future__ import annotations

import structlog

from services.engine.convergence.issuing import job_in_flight
from services.engine.convergence.propagation import fail_stack, node_done
from services.engine.convergence.reaping import reap_orphan
from services.engine.convergence.replacement import replace
from services.engine.convergence.shell import Check, Shell, delete_row, update_row
from services.engine.core.model import Node, ResourceRow, StackRow, forward
from services.engine.core.results import Then, asks_still_wanted, decide_result
from services.engine.effects import Effects
from services.engine.signals import CONDITION, condition_result
from services.engine.snapshotting import job_ended
from services.engine.store.tx import Tx
from shared.protocol import ENGINE_QUEUE, OBSERVE_QUEUE, JobResult, ObserveRequest

log = structlog.get_logger(__name__)


async def result(shell: Shell, tx: Tx, res: JobResult, fx: Effects) -> None:
    row = await tx.resource(res.resource_id)
    if row is None or row.current_job != res.job_id:
        log.info("stale_result", outcome=res.outcome.value)
        await reap_orphan(shell, tx, res, fx)
        return
    stack = await tx.stack(row.stack_id)
    assert row.job_node is not None
    assert row.traversal_id is not None
    node, traversal = Node(row.job_node), row.traversal_id
    await job_ended(tx, row, res, fx)  # what a resource's own snapshot kept
    wanted = asks_still_wanted(res) and await still_wanted(tx, stack, row)
    decision = decide_result(row, res, stack, still_wanted=wanted)
    if decision.delete:
        await delete_row(tx, row)
    else:
        await update_row(tx, row, decision.changes)
    if decision.event is not None:
        e = decision.event
        fx.event(row.stack_id, row.name, e.physical_id, row.type, e.action, e.status.value, e.reason)
    if decision.then is Then.OBSERVE:
        job = job_in_flight(stack, row, res.action, decision.observed, now=shell.deps.clock())
        fx.emit(OBSERVE_QUEUE, ObserveRequest(job=job))
        if row.type == CONDITION:
            await settle_condition(tx, row, fx, now=shell.deps.clock())
        return
    if decision.then is Then.WAKE_WAITING:
        wake_waiting(row, fx)
        return
    assert stack is not None  # the job is the current traversal's
    if decision.then is Then.REPLACE:
        fresh = await tx.resource(row.resource_id)
        assert fresh is not None
        assert stack.current_template_id is not None
        assert decision.replacement is not None
        at = Check(shell=shell, tx=tx, stack=stack, traversal=traversal, node=node, row=fresh, fx=fx)
        await replace(at, decision.replacement)
    elif decision.then is Then.FAIL_STACK:
        await fail_stack(shell, tx, stack, traversal, decision.reason, fx)
    else:
        node_done(tx, stack, traversal, node, fx)


async def settle_condition(tx: Tx, row: ResourceRow, fx: Effects, *, now: float) -> None:
    """A wait condition that starts waiting may already have all its signals."""
    waiting = await tx.resource(row.resource_id)
    handle_ref = (row.job_properties or {}).get("handle")
    if waiting is None or not isinstance(handle_ref, str):
        return
    # Locking the handle orders this with a signal being stored right now:
    # whichever commits second sees the other's write.
    handle = await tx.resource_by_physical_id(row.stack_id, handle_ref, lock=True)
    if handle is not None:
        condition = condition_result(waiting, handle, now=now)
        if condition is not None:
            fx.emit(ENGINE_QUEUE, condition)


async def still_wanted(tx: Tx, stack: StackRow | None, row: ResourceRow) -> bool:
    """Whether the current traversal has a forward node still to do on `row`."""
    if stack is None or stack.current_traversal is None:
        return False
    state = await tx.node(stack.current_traversal, forward(row.resource_id))
    return state is not None and not state.done


def wake_waiting(row: ResourceRow, fx: Effects) -> None:
    """Trigger the check that waits on `row` for its job's outcome, if one does."""
    if row.waiting_traversal is not None and row.waiting_node is not None:
        fx.check(row.stack_id, row.waiting_traversal, row.waiting_node, row.resource_id)
