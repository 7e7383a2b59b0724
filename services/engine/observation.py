"""Continuous observation of stacks: control, rounds, drift (async shell).

Where it sits: the API's `observe_start` / `observe_stop` actions and the
observation view call `Observing`; the engine's scheduler calls
`start_due_rounds` every tick (after `Healing.close_due_rounds`);
`ResourceObserved` reports from observers arrive on the engine queue and go
to `handle`, and `ResourceChanged` (a provider's notification, forwarded by
an observer) to `changed`, which starts the stack's next round now.

A round (one per `interval` per observed stack, or at once after a provider
notification; started by exactly one engine, never while the previous one is
open) asks observers to look at every settled resource of the stack:
`ObserveResource` messages on the observe queue, committed with the round,
whose number the round records. Each report is judged by `core.drift.find_drift`
against what Converge last applied; resources with an action in flight, or
that changed since they were looked at, are not judged (the next round will).
Drift is recorded (the `drift` table holds what exists now, with the round
that saw it; events the history). A resource found gone is recorded missing
on its row at once, heal or not, so any later update creates it again. Each
report then counts towards its round; once every look is answered (or the
look deadline passed) `services.engine.healing` closes the round and, with
`heal` on, starts ONE update with every drifted row marked. While an
operation runs, a report marks its row only if that operation's check of it
is still to come (a later round heals the rest).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import structlog

from services.engine.core.drift import Drift, DriftKind, find_drift, heal_marks, missing_marks
from services.engine.core.model import (
    STACK_ACTIONS,
    Action,
    ResourceRow,
    StackId,
    StackRow,
    Status,
    TraversalId,
    forward,
)
from services.engine.core.row_change import ResourceChange
from services.engine.deps import EngineDeps
from services.engine.effects import Effects
from services.engine.jobs import job_for
from services.engine.store.tx import Tx
from shared.errors import ConflictError, InvalidInput, NotFound
from shared.protocol import OBSERVE_QUEUE, JobAction, ObserveResource, ResourceChanged, ResourceObserved

log = structlog.get_logger(__name__)

MIN_INTERVAL = 1.0
MAX_INTERVAL = 86_400.0
LOOK_SECONDS = 60.0  # how long an observer may take to look at one resource
ROUND_GRACE_SECONDS = 5.0  # and its report to reach an engine, before its round closes without it
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
    def __init__(self, deps: EngineDeps) -> None:
        self._store = deps.store
        self._outbox = deps.outbox
        self._definitions = deps.definitions
        self._types = deps.types
        self._clock = deps.clock  # a look's deadline (seconds since the epoch)
        self._ids = deps.ids

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
                looks = [
                    self._look(stack, row, due.cycle)
                    for row in await tx.resources(due.stack_id)
                    if self._lookable(row)
                ]
                for look in looks:
                    effects.emit(OBSERVE_QUEUE, look)
                deadline = LOOK_SECONDS + ROUND_GRACE_SECONDS
                await tx.round_sent(due.stack_id, looks=len(looks), deadline_secs=deadline)
            ids = await effects.commit(tx)
        await self._outbox.publish(ids, effects.messages)
        return len(rounds)

    def _lookable(self, row: ResourceRow) -> bool:
        """A settled, current resource of a type observers know (no look is sent for one
        whose report could not be judged, so the round does not wait for it)."""
        return row.exists and row.replaced_by is None and row.current_job is None and row.type in self._types

    def _look(self, stack: StackRow, row: ResourceRow, cycle: int) -> ObserveResource:
        now = self._clock()
        job = job_for(
            stack,
            row,
            job_id=f"look-{self._ids.job()}",
            traversal=stack.current_traversal or NO_TRAVERSAL,
            action=JobAction.CHECK,
            type_name=row.type,
            physical_id=row.physical_id,
            properties=row.properties or {},
            now=now,
        )
        deadline = now + LOOK_SECONDS
        return ObserveResource(job=job.model_copy(update={"deadline": deadline}), cycle=cycle)

    async def changed(self, message: ResourceChanged) -> None:
        """A provider notified a change: wherever a stack under observation holds the
        resource, its next round starts now (no need to wait for the interval). A whole
        round, not a lone look, so what changed together is judged and healed together;
        the notifications of one burst fall into the same round (rounds started this way
        are at least the shortest interval apart)."""
        async with self._store.transaction() as tx:
            if not await tx.claim_message(message.id):
                return
            stacks = await tx.observed_stacks_holding(message.physical_id)
            if stacks:
                await tx.trigger_rounds(stacks, gap=MIN_INTERVAL)

    # -- reports --------------------------------------------------------------

    async def handle(self, report: ResourceObserved) -> None:
        """Judge the report, then count it towards its round, each once (a redelivered
        report that was judged already is still counted)."""
        effects = Effects()
        async with self._store.transaction() as tx:
            if await tx.claim_message(report.id):
                await self._judge(tx, report, effects)
            ids = await effects.commit(tx)
        await self._outbox.publish(ids, effects.messages)
        async with self._store.transaction() as tx:  # alone: it locks the observation row
            if await tx.claim_message(f"{report.id}:counted"):
                await tx.count_report(StackId(uuid.UUID(report.stack_id)), report.cycle)

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
        if drift.kind is DriftKind.GONE:  # recorded on the row, heal or not: updates create it again
            await _mark(tx, row, missing_marks(drift.reason))
        elif settings.heal:
            await self._mark_pending(tx, stack, row, drift)

    async def _mark_pending(self, tx: Tx, stack: StackRow, row: ResourceRow, drift: Drift) -> None:
        """While an operation runs, mark the row if that operation's check of it is still
        to come: the check puts it back. Otherwise the round's heal does."""
        if stack.status is not Status.IN_PROGRESS or stack.current_traversal is None:
            return
        if stack.action in STACK_ACTIONS:
            return
        pending = await tx.node(stack.current_traversal, forward(row.resource_id))
        if pending is not None and not pending.done:
            await _mark(tx, row, heal_marks(drift))


async def _mark(tx: Tx, row: ResourceRow, change: ResourceChange) -> None:
    if not await tx.update_resource(row, change):
        raise ConflictError(f"resource {row.resource_id} changed while marking its drift; will retry")
