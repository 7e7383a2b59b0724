"""After a node: its dependents, its sync points, its traversal's end, a failed stack.

Where it sits: a node check (`checks`) or a job result (`results`) that
finishes a node calls `node_done`; the nodes finished are gathered in
`Effects.finished` and settled once, last before the commit (`settle`, called
by `handling` and `follow_on`): their rows are written done in one statement,
with the cleanups of the rows those forward nodes keep (`core.graph.kept_cleanups`),
the dependents that needed only them are checked, the sync points they made
ready are triggered, and a traversal whose last counted nodes they were ends
(`traversal_done`: the stack COMPLETE, or CHECK_FAILED naming what a stack
check found, as `core.node_checks.traversal_end` decides). A failure that
stops the operation goes through `fail_stack` (`traversal.fail_or_roll_back`:
FAILED, or a rollback).
"""

from __future__ import annotations

import structlog

from services.engine.convergence.shell import Shell
from services.engine.core.decide import Cleanup, decide_cleanup
from services.engine.core.graph import FinishedNode, kept_cleanups, triggered
from services.engine.core.model import Action, Node, StackRow, Status, TraversalId, resource_of
from services.engine.core.node_checks import traversal_end
from services.engine.effects import Effects, Finished
from services.engine.store.tx import Tx
from services.engine.traversal import fail_or_roll_back

log = structlog.get_logger(__name__)


def node_done(tx: Tx, stack: StackRow, traversal: TraversalId, node: Node, fx: Effects) -> None:
    """`node` is done: it reads done from now on in `tx`; its row, its dependents, its
    sync points and its traversal's end wait for `settle`, at the transaction's end."""
    tx.finishing(traversal, node)
    fx.finished.nodes.setdefault((traversal, node), stack)


async def settle(shell: Shell, tx: Tx, fx: Effects) -> None:
    """Settle the nodes finished in this transaction (`Effects.finished`): write them
    done (one statement) and the cleanups of the rows they keep (one more, in an
    update), trigger the dependents that waited for them alone and the sync points
    they made ready (one statement), then end each traversal whose last counted nodes
    they were (`core.graph.triggered` says which is which). Called last before the
    commit: the rows are locked only from here to the commit, and a shard of the
    traversal's count only by transactions that finished a counted node."""
    nodes = fx.finished.nodes
    if not nodes:
        return
    stacks = {traversal: stack for (traversal, _), stack in nodes.items()}
    finished = await tx.finish_nodes(nodes)
    finished.update(await finish_kept_cleanups(tx, stacks, finished))
    then = triggered(finished)
    for traversal, node in then.checks:
        fx.check(stacks[traversal].stack_id, traversal, node, resource_of(node))
    for traversal, node in await tx.satisfy(then.reports):
        fx.check(stacks[traversal].stack_id, traversal, node, resource_of(node))
    for traversal in sorted(then.counted):
        if await tx.count_down(traversal, then.counted[traversal]):
            await traversal_done(shell, tx, stacks[traversal], traversal, fx)
    fx.finished = Finished()


async def finish_kept_cleanups(
    tx: Tx, stacks: dict[TraversalId, StackRow], finished: dict[tuple[TraversalId, Node], FinishedNode]
) -> dict[tuple[TraversalId, Node], FinishedNode]:
    """Finish now the cleanup nodes of the rows whose forward nodes are `finished` and
    that their cleanup would keep (`core.decide.decide_cleanup`: the row is the
    resource's, from the stack's template): what the cleanup check would do once the
    cleanups of the rows that required it were done, done at once, so those no longer
    hold it back. A row replaced or left out waits for its cleanup in order."""
    candidates = kept_cleanups(finished)
    if not candidates:
        return {}
    rows = await tx.resources_by_id(resource_of(node) for _, node in candidates)
    kept = [
        (traversal, node)
        for traversal, node in candidates
        if (row := rows.get(resource_of(node))) is not None
        and decide_cleanup(row, current_template_id=stacks[traversal].current_template_id) is Cleanup.KEEP
    ]
    return await tx.finish_nodes(kept, counted_only=True)


async def traversal_done(shell: Shell, tx: Tx, stack: StackRow, traversal: TraversalId, fx: Effects) -> None:
    """The last counted node of `traversal` is done: the stack's operation is COMPLETE (a
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
