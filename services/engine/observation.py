"""Continuous observation of stacks: control, rounds, drift and healing (async shell).

Where it sits: the API's `observe_start` / `observe_stop` actions and the
observation view call `Observing`; the engine's scheduler calls
`start_due_rounds` every tick; `ResourceObserved` reports from observers
arrive on the engine queue and go to `handle`, and `ResourceChanged` (a
provider's notification, forwarded by an observer) to `changed`, which has
the resource looked at at once.

A round (one per `interval` per observed stack, started by exactly one
engine) asks observers to look at every settled resource of the stack:
`ObserveResource` messages on the observe queue, committed with the round.
Each report is judged by `core.drift.find_drift` against what Converge last
applied; resources with an action in flight, or that changed since they were
looked at, are not judged (the next round will). Drift is recorded (the
`drift` table holds what exists now, events the history); with `heal` on, a
stack at rest gets an update to its current template with the drifted row
marked (`core.drift.heal_marks`) so the ordinary forward check puts the world
back. A report arriving while an operation runs marks the row only if that
operation's check of it is still to come.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

import structlog

from services.engine.core.drift import Drift, find_drift, heal_marks
from services.engine.core.model import Action, ResourceRow, StackId, StackRow, Status, TraversalId, forward
from services.engine.definitions import DefinitionCache
from services.engine.effects import Effects
from services.engine.jobs import job_for
from services.engine.outbox import Outbox
from services.engine.store import Store
from services.engine.store.tx import Tx
from services.engine.traversal import STACK_ACTIONS, begin_traversal
from shared.errors import ConflictError, InvalidInput, NotFound
from shared.plugins import ResourceType
from shared.protocol import OBSERVE_QUEUE, JobAction, ObserveResource, ResourceChanged, ResourceObserved

log = structlog.get_logger(__name__)

MIN_INTERVAL = 1.0
MAX_INTERVAL = 86_400.0
LOOK_SECONDS = 60.0  # how long an observer may take to look at one resource
NO_TRAVERSAL = TraversalId(uuid.UUID(int=0))


def observe_settings(body: Any) -> tuple[float, bool]:
    """(interval, heal) from an `observe_start` action body; InvalidInput naming the field."""
    if body is None:
        body = {}
    if not isinstance(body, Mapping):
        raise InvalidInput('observe_start takes an object: {"interval": <seconds>, "heal": <bool>}')
    unknown = sorted(set(body) - {"interval", "heal"})
    if unknown:
        raise InvalidInput(f"unknown field(s) {', '.join(unknown)}", path="observe_start")
    interval = body.get("interval", 60)
    if isinstance(interval, bool) or not isinstance(interval, int | float):
        raise InvalidInput("interval must be a number of seconds", path="observe_start.interval")
    if not MIN_INTERVAL <= interval <= MAX_INTERVAL:
        raise InvalidInput(
            f"interval must be from {MIN_INTERVAL:g} to {MAX_INTERVAL:g} seconds",
            path="observe_start.interval",
        )
    heal = body.get("heal", False)
    if not isinstance(heal, bool):
        raise InvalidInput("heal must be true or false", path="observe_start.heal")
    return float(interval), heal


class Observing:
    def __init__(
        self,
        *,
        store: Store,
        outbox: Outbox,
        definitions: DefinitionCache,
        types: Mapping[str, type[ResourceType]],
    ) -> None:
        self._store = store
        self._outbox = outbox
        self._definitions = definitions
        self._types = types

    # -- control --------------------------------------------------------------

    async def start(self, stack_id: StackId, *, interval: float, heal: bool) -> None:
        async with self._store.transaction() as tx:
            await self._live_stack(tx, stack_id)
            await tx.set_observation(stack_id, enabled=True, interval=interval, heal=heal)
        log.info("observation_started", stack_id=str(stack_id), interval=interval, heal=heal)

    async def stop(self, stack_id: StackId) -> None:
        async with self._store.transaction() as tx:
            await self._live_stack(tx, stack_id)
            current = await tx.observation(stack_id)
            interval, heal = (current.interval, current.heal) if current else (60.0, False)
            await tx.set_observation(stack_id, enabled=False, interval=interval, heal=heal)
        log.info("observation_stopped", stack_id=str(stack_id))

    async def view(self, stack_id: StackId) -> dict[str, Any]:
        """The stack's observation settings and the drift that exists now."""
        async with self._store.transaction() as tx:
            current = await tx.observation(stack_id)
            drift = await tx.drift(stack_id)
        return {
            "enabled": bool(current and current.enabled),
            "interval": current.interval if current else None,
            "heal": bool(current and current.heal),
            "last_cycle_at": current.last_cycle_at.isoformat() if current and current.last_cycle_at else None,
            "drifted": [
                {
                    "resource_name": d.resource_name,
                    "physical_resource_id": d.physical_id,
                    "reason": d.reason,
                    "differences": d.differences,
                }
                for d in drift
            ],
        }

    async def _live_stack(self, tx: Tx, stack_id: StackId) -> StackRow:
        stack = await tx.stack(stack_id)
        if stack is None or (stack.action is Action.DELETE and stack.status is Status.COMPLETE):
            raise NotFound(f"stack {stack_id} not found")
        return stack

    # -- rounds ---------------------------------------------------------------

    async def start_due_rounds(self) -> int:
        """Start every round that is due: ask observers to look at each settled resource."""
        effects = Effects()
        async with self._store.transaction() as tx:
            rounds = await tx.start_due_rounds()
            for due in rounds:
                stack = await tx.stack(due.stack_id)
                if stack is None or stack.action is Action.DELETE:
                    continue
                for row in await tx.resources(due.stack_id):
                    if row.exists and row.replaced_by is None and row.current_job is None:
                        effects.emit(OBSERVE_QUEUE, self._look(stack, row, due.cycle))
            ids = await effects.commit(tx)
        await self._outbox.publish(ids, effects.messages)
        return len(rounds)

    def _look(self, stack: StackRow, row: ResourceRow, cycle: int) -> ObserveResource:
        job = job_for(
            stack,
            row,
            job_id=f"look-{uuid.uuid4().hex}",
            traversal=stack.current_traversal or NO_TRAVERSAL,
            action=JobAction.CHECK,
            type_name=row.type,
            physical_id=row.physical_id,
            properties=row.properties or {},
        )
        deadline = time.time() + LOOK_SECONDS
        return ObserveResource(job=job.model_copy(update={"deadline": deadline}), cycle=cycle)

    async def changed(self, message: ResourceChanged) -> None:
        """A provider notified a change: have the resource looked at now, wherever a
        stack under observation holds it (no need to wait for the next round)."""
        effects = Effects()
        async with self._store.transaction() as tx:
            if not await tx.claim_message(message.id):
                return
            for stack_id in await tx.observed_stacks_holding(message.physical_id):
                stack = await tx.stack(stack_id)
                settings = await tx.observation(stack_id)
                row = await tx.resource_by_physical_id(stack_id, message.physical_id)
                if stack is None or settings is None or row is None or row.current_job is not None:
                    continue
                if stack.action is not Action.DELETE:
                    effects.emit(OBSERVE_QUEUE, self._look(stack, row, settings.cycle))
            ids = await effects.commit(tx)
        await self._outbox.publish(ids, effects.messages)

    # -- reports --------------------------------------------------------------

    async def handle(self, report: ResourceObserved) -> None:
        effects = Effects()
        async with self._store.transaction() as tx:
            if not await tx.claim_message(report.id):
                return
            await self._judge(tx, report, effects)
            ids = await effects.commit(tx)
        await self._outbox.publish(ids, effects.messages)

    async def _judge(self, tx: Tx, report: ResourceObserved, fx: Effects) -> None:
        stack_id = StackId(uuid.UUID(report.stack_id))
        settings = await tx.observation(stack_id)
        row = await tx.resource(report.resource_id)
        stack = await tx.stack(stack_id)
        if settings is None or not settings.enabled or row is None or stack is None:
            return
        if (
            row.physical_id != report.physical_id
            or row.current_job is not None
            or row.replaced_by is not None
            or dict(row.properties or {}) != report.expected
            or stack.action is Action.DELETE
            or row.type not in self._types
        ):
            log.debug("observation_outdated", resource=row.name)  # the next round judges it
            return
        schema = self._types[row.type].properties
        drift = find_drift(schema, row.properties or {}, report.state, report.properties, report.reason)
        if drift is None:
            if await tx.clear_drift(row.resource_id):
                fx.event(stack_id, row.name, row.physical_id, row.type, "OBSERVE", "IN_SYNC", "no drift")
            return
        assert row.physical_id is not None
        differences = {k: dict(v) for k, v in drift.differences.items()}
        where = (row.resource_id, stack_id, row.name, row.physical_id)
        if await tx.record_drift(*where, drift.reason, differences, cycle=report.cycle):
            fx.event(stack_id, row.name, row.physical_id, row.type, "OBSERVE", "DRIFTED", drift.reason)
            log.info("drift", resource=row.name, kind=drift.kind.value, reason=drift.reason)
        if settings.heal:
            await self._heal(tx, stack, row, drift, fx)

    async def _heal(self, tx: Tx, stack: StackRow, row: ResourceRow, drift: Drift, fx: Effects) -> None:
        if stack.status is Status.IN_PROGRESS:
            if stack.current_traversal is None or stack.action in STACK_ACTIONS:
                return
            pending = await tx.node(stack.current_traversal, forward(row.resource_id))
            if pending is not None and not pending.done:
                await _mark(tx, row, drift)  # the check still to come puts it back
            return
        if stack.status is not Status.COMPLETE:
            return  # a failed stack is left to its user
        existing = await tx.claim_resources(stack.stack_id)  # rows before the stack row, as checks do
        locked = await tx.stack(stack.stack_id, lock=True)
        if locked is None or locked.status is not Status.COMPLETE or locked.current_template_id is None:
            return
        fresh = next((r for r in existing if r.resource_id == row.resource_id), None)
        if fresh is None or fresh.physical_id != row.physical_id:
            return
        await _mark(tx, fresh, drift)
        definition = await self._definitions.get(tx, locked, locked.current_template_id)
        await begin_traversal(
            tx,
            locked,
            template_id=locked.current_template_id,
            definition=definition,
            action=Action.UPDATE,
            fx=fx,
            existing=existing,
            reason=f"Healing drift of {row.name}: {drift.reason}",
        )
        log.info("healing", resource=row.name, kind=drift.kind.value)


async def _mark(tx: Tx, row: ResourceRow, drift: Drift) -> None:
    if not await tx.update_resource(row, **heal_marks(drift)):
        raise ConflictError(f"resource {row.resource_id} changed while healing; will retry")
