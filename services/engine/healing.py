"""Closing rounds of observation, and healing what they found (async shell).

Where it sits: the engine's scheduler calls `close_due_rounds` every tick,
before `Observing.start_due_rounds`. A round (see `observation`) is open
until every look it sent was answered or its look deadline passed; then one
engine closes it (compare-and-set on the observation row) and, when the
stack heals, asks `core.healing.decide_heal` whether to heal now. A heal is
ONE update to the stack's current template with every drifted row marked,
started in the transaction that closes the round, so resources that vanished
together are rebuilt together, in dependency order. A heal that failed is
retried in a later round after a growing pause (`HealPolicy`); the stack's
own user's failed operations are never retried.

Locks: the observation row, then the stack's resource rows (claimed as
operations claim them), then the stack row.
"""

from __future__ import annotations

import structlog

from services.engine.core.healing import HealDecision, HealKind, HealPolicy, HealState, SeenDrift, decide_heal
from services.engine.core.model import Action, ResourceId, StackId
from services.engine.deps import EngineDeps
from services.engine.effects import Effects
from services.engine.store.observing import ClosedRound
from services.engine.store.tx import Tx
from services.engine.traversal import begin_traversal
from shared.errors import ConflictError

log = structlog.get_logger(__name__)


class Healing:
    def __init__(self, deps: EngineDeps, *, policy: HealPolicy) -> None:
        self._ids = deps.ids  # a heal's traversal id (its time is the database's: `tx.rounds_to_close`)
        self._store = deps.store
        self._outbox = deps.outbox
        self._definitions = deps.definitions
        self._policy = policy

    async def close_due_rounds(self) -> int:
        """Close every round that is complete or overdue; heal where that is due."""
        async with self._store.transaction() as tx:
            due = await tx.rounds_to_close()
        closed = 0
        for stack_id, cycle in due:
            try:
                closed += await self._close(stack_id, cycle)
            except ConflictError as exc:  # lost a race with a check: the next tick tries again
                log.info("round_close_retry", stack_id=str(stack_id), error=str(exc))
        return closed

    async def _close(self, stack_id: StackId, cycle: int) -> int:
        effects = Effects()
        async with self._store.transaction() as tx:
            closing = await tx.close_round(stack_id, cycle)
            if closing is None:
                return 0  # another engine closed it
            if closing.enabled and closing.heal:
                await self._maybe_heal(tx, stack_id, cycle, closing, effects)
            ids = await effects.commit(tx)
        await self._outbox.publish(ids, effects.messages)
        return 1

    async def _maybe_heal(
        self, tx: Tx, stack_id: StackId, cycle: int, closing: ClosedRound, fx: Effects
    ) -> None:
        state = HealState(closing.heal_traversal, closing.heal_attempts, closing.heal_not_before)
        decision = await self._decide(tx, stack_id, cycle, state, closing.now, lock=False)
        if decision is None or decision.kind is HealKind.NONE:
            return
        if decision.kind is HealKind.WAIT:
            assert decision.not_before is not None
            await tx.heal_waits(stack_id, until=decision.not_before)
            log.info("heal_waits", stack_id=str(stack_id), seconds=decision.not_before - closing.now)
            return
        # Decide again on the rows claimed (locked), as an operation starts from them.
        decision = await self._decide(tx, stack_id, cycle, state, closing.now, lock=True)
        if decision is None or decision.kind is not HealKind.HEAL:
            return
        await self._heal(tx, stack_id, decision, fx)

    async def _decide(
        self, tx: Tx, stack_id: StackId, cycle: int, state: HealState, now: float, *, lock: bool
    ) -> HealDecision | None:
        rows = await (tx.claim_resources(stack_id) if lock else tx.resources(stack_id))
        stack = await tx.stack(stack_id, lock=lock)
        if stack is None:
            return None
        drift = [
            SeenDrift(d.resource_id, d.physical_id, d.reason, d.differences, d.cycle)
            for d in await tx.seen_drift(stack_id)
        ]
        decision = decide_heal(stack, rows, drift, cycle=cycle, state=state, now=now, policy=self._policy)
        log.debug("heal_decision", stack_id=str(stack_id), kind=decision.kind.value, why=decision.why)
        return decision

    async def _heal(self, tx: Tx, stack_id: StackId, decision: HealDecision, fx: Effects) -> None:
        """Mark the rows and start the update (rows and stack are locked already)."""
        existing = await tx.resources(stack_id)
        by_id = {r.resource_id: r for r in existing}
        for resource_id, changes in decision.marks.items():
            row = by_id[ResourceId(resource_id)]
            if not await tx.update_resource(row, changes):
                raise ConflictError(f"resource {row.resource_id} changed while healing; will retry")
        stack = await tx.stack(stack_id)
        assert stack is not None
        assert stack.current_template_id is not None
        definition = await self._definitions.get(tx, stack, stack.current_template_id)
        traversal = await begin_traversal(
            tx,
            stack,
            template_id=stack.current_template_id,
            definition=definition,
            action=Action.UPDATE,
            fx=fx,
            existing=await tx.resources(stack_id),
            reason=decision.reason,
            ids=self._ids,
        )
        await tx.heal_started(stack_id, traversal, attempts=decision.attempts)
        log.info("healing", stack_id=str(stack_id), reason=decision.reason, attempt=decision.attempts)
