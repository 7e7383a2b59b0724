"""Handling the engine queue: one transaction a message, or one a batch.

Where it sits: the engine service (`services.engine.service`) hands node
checks and job results to `Convergence.handle_batch` (fed by `batching`)
and every engine message to `Convergence.handle`. Each handling is one
transaction that claims the message ids (inbox, so a redelivery changes
nothing), reads the few rows the decision needs, decides (`checks` for a
`CheckResource`, `results` for a `JobResult`, `nested.children` for a
nested stack's job, `traversal.start_reserved` for an update's
`StartTraversal`), and writes rows, events and outgoing messages (outbox)
together; the outbox is published after commit. A batch claims its ids and
reads its rows in one statement each (`store.prefetch`), decides each message
in turn as it would be alone, and settles its finished nodes once at the end
(`propagation.settle`: the sync points they made ready, and the traversal's
end when its last counted nodes are done), then handles the node checks that
triggered in the same transaction (`follow_on`, up to the batch policy's
`follow_on` of them) instead of sending them, with one outbox write and one publish for
what is left to send. A
check whose values need the template pool (yaql on an attribute) never waits
for it in the transaction: it is rolled back, the values are resolved, and
the message is handled again (`resolving.Resolved`).

`expire_overdue` (the service's timer) fails, or rolls back, operations past
their `timeout_mins`.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from services.engine.convergence import checks, propagation, results
from services.engine.convergence.follow_on import handle_follow_on
from services.engine.convergence.shell import Shell
from services.engine.core.model import Node, StackId, TraversalId
from services.engine.core.results import asks_still_wanted
from services.engine.deps import EngineDeps
from services.engine.effects import Effects
from services.engine.gates import Gates
from services.engine.messages import CheckResource, StartTraversal
from services.engine.nested.answer import cancel_children
from services.engine.nested.children import Children
from services.engine.nested.messages import CancelNested, NestedStackJob
from services.engine.resolving import Resolved, ValuesNeeded
from services.engine.traversal import start_reserved
from shared.bus import Delivery
from shared.logging import log_context
from shared.messages import Message
from shared.protocol import JobResult

log = structlog.get_logger(__name__)


class Convergence:
    """The engine's convergence shell: what the service calls for engine messages."""

    def __init__(self, deps: EngineDeps, *, follow_on: int = 0) -> None:
        """`follow_on`: how many of the node checks a batch triggers it handles itself
        (`follow_on`; 0: all are sent)."""
        self._follow_on = follow_on
        # Hooks and converge's observations, between a node's decision and its action.
        self.gates = Gates(deps)
        self.children = Children(deps)  # nested stack jobs: a child stack's operation
        self._shell = Shell(deps=deps, gates=self.gates, children=self.children)

    async def handle(self, message: Message, delivery: Delivery) -> None:
        context = _context(message)
        with log_context(**context):
            resolved = Resolved()
            while True:
                try:
                    await self._handle_once(message, resolved)
                    return
                except ValuesNeeded as need:  # rolled back: resolve off the loop, then again
                    await resolved.resolve(self._shell.deps.templates, need)

    async def handle_batch(self, messages: Sequence[CheckResource | JobResult]) -> None:
        """Handle node checks and job results together: one transaction (claimed in one
        statement, decided one after the other as `handle` would, settled once), one
        outbox write and one publish for the batch. Raises whatever one of them
        raises (a conflict, values the template pool must resolve first, ...), with
        nothing committed: the caller then handles each message alone (`handle`)."""
        shell = self._shell
        effects = Effects()
        async with shell.deps.store.transaction() as tx:
            fresh = await tx.claim_messages([m.id for m in messages])
            todo = [m for m in messages if m.id in fresh]
            node_checks = [m for m in todo if isinstance(m, CheckResource)]
            deletes = [m.resource_id for m in todo if isinstance(m, JobResult) and asks_still_wanted(m)]
            await tx.prefetch(
                resources=[m.resource_id for m in todo],
                stacks=[StackId(m.stack_id) for m in node_checks],
                nodes=[(TraversalId(m.traversal_id), Node(m.node)) for m in node_checks],
                current_forward=deletes,  # does the current traversal still want the row?
            )
            await checks.read_ahead(shell, tx, node_checks)
            for message in messages:
                if message.id not in fresh:
                    log.debug("duplicate_message", message_id=message.id)
                    continue
                fresh.discard(message.id)  # the same message twice in one batch: once
                with log_context(**_context(message)):
                    if isinstance(message, CheckResource):
                        await checks.check(shell, tx, message, effects, Resolved())
                    else:
                        await results.result(shell, tx, message, effects)
            await propagation.settle(shell, tx, effects)
            await handle_follow_on(shell, tx, effects, limit=self._follow_on)
            ids = await effects.commit(tx)
        await shell.deps.outbox.publish(ids, effects.messages)

    async def _handle_once(self, message: Message, resolved: Resolved) -> None:
        shell = self._shell
        effects = Effects()
        async with shell.deps.store.transaction() as tx:
            if not await tx.claim_message(message.id):
                log.debug("duplicate_message", message_id=message.id)
                return
            if isinstance(message, CheckResource):
                await checks.check(shell, tx, message, effects, resolved)
            elif isinstance(message, JobResult):
                await results.result(shell, tx, message, effects)
            elif isinstance(message, NestedStackJob):
                await shell.children.start(tx, message, effects)
            elif isinstance(message, CancelNested):
                await shell.children.cancel(tx, message, effects)
            elif isinstance(message, StartTraversal):
                await start_reserved(tx, message, effects, definitions=shell.deps.definitions)
            await propagation.settle(shell, tx, effects)
            ids = await effects.commit(tx)
        await shell.deps.outbox.publish(ids, effects.messages)

    async def expire_overdue(self, *, now: float) -> int:
        """Fail (and roll back, where enabled) operations past their timeout_mins."""
        shell = self._shell
        effects = Effects()
        async with shell.deps.store.transaction() as tx:
            overdue = await tx.overdue_stacks(now)
            for stack in overdue:
                assert stack.current_traversal is not None
                names = await tx.in_progress_names(stack.stack_id)
                reason = (
                    f"Stack {stack.action.value} timed out; still in progress: {', '.join(names) or 'none'}"
                )
                cancel_children(await tx.resources(stack.stack_id), effects)
                await tx.disown_jobs(stack.stack_id, stack.current_traversal, "Resource timed out")
                await propagation.fail_stack(shell, tx, stack, stack.current_traversal, reason, effects)
            ids = await effects.commit(tx)
        await shell.deps.outbox.publish(ids, effects.messages)
        return len(overdue)


def _context(message: Message) -> dict[str, str]:
    """What the log lines of handling `message` name."""
    if isinstance(message, CheckResource | StartTraversal):
        return {"stack_id": str(message.stack_id), "traversal_id": str(message.traversal_id)}
    if isinstance(message, JobResult):
        return {"stack_id": message.stack_id, "resource": message.resource_name, "job_id": message.job_id}
    if isinstance(message, NestedStackJob | CancelNested):
        return {"stack_id": str(message.stack_id), "job_id": message.job_id}
    return {}
