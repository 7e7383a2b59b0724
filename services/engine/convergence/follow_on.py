"""Follow-on checks: the node checks a batch triggers, handled in the batch's own transaction.

Where it sits: `handling.Convergence.handle_batch`, once its messages are
decided and settled, calls `handle_follow_on`. The checks they emitted (the
dependents of the nodes they finished, the sync points those made ready)
would each go out through the outbox and the engine queue, to be claimed,
read and decided by some engine in a transaction of its own. Handling one
here instead is that message sent and handled at once: the same decision
(`checks.check`) in the same transaction as what triggered it, so it commits
or vanishes with it, and nothing of it is ever on the queue to lose. It
saves per resource a message through RabbitMQ, an outbox row written and
deleted, an inbox claim and a transaction.

Rounds: the checks taken are read and locked in one statement
(`Tx.prefetch`, rows another transaction holds are skipped, never waited
for: those checks are sent as usual), decided, and settled; what they
trigger is the next round's, up to `limit` checks in all, the rest sent.
Rows of a stack an operation is claiming (`Tx.claims_under_way`) are left
alone too: taking them would make the claim, and with it the preemption,
wait for this batch. A round waits at most `LOCK_WAIT` for any other lock.
A round runs in a savepoint: if any of its checks raises (a conflict, values
the template pool must resolve first, ...), the round is undone, its effects
forgotten, and its checks are sent as messages, to be handled on the ordinary
path with everything it does about such cases.
"""

from __future__ import annotations

import structlog

from services.engine.convergence import checks, propagation
from services.engine.convergence.shell import Shell
from services.engine.core.model import Node, StackId, TraversalId
from services.engine.effects import Effects
from services.engine.messages import CheckResource
from services.engine.resolving import Resolved
from services.engine.store.tx import Tx
from shared.errors import ConvergeError

log = structlog.get_logger(__name__)

#: Seconds a follow-on round may wait for a lock (a sync point, a traversal) another
#: transaction holds before it is undone and its checks sent: a batch never holds its
#: own locks long waiting for others' (which an operation's claim would wait behind).
LOCK_WAIT = 0.02


async def handle_follow_on(shell: Shell, tx: Tx, fx: Effects, *, limit: int) -> int:
    """Handle up to `limit` of the checks `fx` holds (and those they trigger) in `tx`;
    the rest stay in `fx`, to be sent. Returns how many were handled here."""
    handled = 0
    busy: list[CheckResource] = []  # rows another transaction holds: sent, at the end
    while handled < limit and fx.checks:
        assert not fx.finished, "settle before taking follow-on checks"
        taken = fx.take_checks(limit - handled)
        mark = fx.mark()
        try:
            async with tx.savepoint(lock_wait=LOCK_WAIT):
                claimed = await tx.claims_under_way(StackId(c.stack_id) for c in taken)
                wanted = [c for c in taken if c.stack_id not in claimed]
                locked = await tx.prefetch(
                    resources=[c.resource_id for c in wanted],
                    stacks=[StackId(c.stack_id) for c in wanted],
                    nodes=[(TraversalId(c.traversal_id), Node(c.node)) for c in wanted],
                    skip_locked=True,
                )
                here = [c for c in wanted if c.resource_id in locked]
                await checks.read_ahead(shell, tx, here)
                for message in here:
                    await checks.check(shell, tx, message, fx, Resolved())
                await propagation.settle(shell, tx, fx)
        except ConvergeError as exc:  # undone: these go out as messages, the ordinary path
            fx.undo(mark)
            busy.extend(taken)
            log.info("follow_on_undone", checks=len(taken), error=f"{type(exc).__name__}: {exc}")
            break
        decided = {id(c) for c in here}
        busy.extend(c for c in taken if id(c) not in decided)
        handled += len(here)
    for message in busy:
        fx.send_check(message)
    return handled
