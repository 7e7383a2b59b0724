"""After a node: its dependents, its sync points, its traversal's end, a failed stack.

Where it sits: a node check (`checks`) or a job result (`results`) that
finishes a node calls `node_done`: the dependents that needed only it are
checked at once; the sync points it fed and the sinks it ended are gathered
in `Effects.finished` and settled once, last before the commit (`settle`,
called by `handling`): the sync points they made ready are triggered, and a
traversal whose last sinks they were ends (`traversal_done`: the stack
COMPLETE, or CHECK_FAILED naming what a stack check found, as
`core.node_checks.traversal_end` decides). A failure that stops the operation
goes through `fail_stack` (`traversal.fail_or_roll_back`: FAILED, or a
rollback).
"""

from __future__ import annotations

import structlog

from services.engine.convergence.shell import Shell
from services.engine.core.model import Action, Node, StackRow, Status, TraversalId, resource_of
from services.engine.core.node_checks import traversal_end
from services.engine.effects import Effects, Finished
from services.engine.store.tx import Tx
from services.engine.traversal import fail_or_roll_back

log = structlog.get_logger(__name__)


async def node_done(tx: Tx, stack: StackRow, traversal: TraversalId, node: Node, fx: Effects) -> None:
    """Mark `node` done and trigger the dependents that needed only it; its sync
    points and its traversal's end wait for `settle`, at the transaction's end."""
    finished = await tx.finish_node(traversal, node)
    if finished is None:
        return
    for dependent in finished.direct:
        fx.check(stack.stack_id, traversal, dependent, resource_of(dependent))
    done = fx.finished
    done.stacks[traversal] = stack
    done.syncs.extend((traversal, dependent, node) for dependent in finished.synced)
    if not finished.direct and not finished.synced:
        done.sinks[traversal] += 1


async def settle(shell: Shell, tx: Tx, fx: Effects) -> None:
    """Settle the nodes finished in this transaction (`Effects.finished`): trigger
    the sync points they made ready, then end each traversal whose last sinks
    they were. Called last before the commit: the traversal's row is locked
    only from here to the commit, and only by transactions that finished a sink."""
    done = fx.finished
    if not done:
        return
    for traversal, node in await tx.satisfy(done.syncs):
        fx.check(done.stacks[traversal].stack_id, traversal, node, resource_of(node))
    for traversal in sorted(done.sinks):
        if await tx.count_down(traversal, done.sinks[traversal]) == 0:
            await traversal_done(shell, tx, done.stacks[traversal], traversal, fx)
    fx.finished = Finished()


async def traversal_done(shell: Shell, tx: Tx, stack: StackRow, traversal: TraversalId, fx: Effects) -> None:
    """The last sink of `traversal` is done: the stack's operation is COMPLETE (a
    stack check that found failures fails instead, naming them: `core.node_checks.traversal_end`)."""
    action = stack.action
    failed = await tx.failed_checks(stack.stack_id, traversal) if action is Action.CHECK else []
    end = traversal_end(stack, failed)
    if end.status is Status.FAILED:
        await fail_stack(shell, tx, stack, traversal, end.reason, fx)
        return
    if await tx.set_stack_status(stack.stack_id, traversal, Status.COMPLETE, end.reason, deleted=end.deleted):
        fx.stack_event(stack, action.value, "COMPLETE", end.reason)
        log.info("stack_complete", stack=stack.name, action=action.value)
        await shell.deps.answers.stack_ended(tx, stack, Status.COMPLETE, end.reason, fx)


async def fail_stack(
    shell: Shell, tx: Tx, stack: StackRow, traversal: TraversalId, reason: str, fx: Effects
) -> None:
    await fail_or_roll_back(
        tx,
        stack,
        traversal,
        reason,
        fx,
        definitions=shell.deps.definitions,
        answers=shell.deps.answers,
        ids=shell.deps.ids,
    )
