"""The engine's consumer retries a conflict inside its handler: the bus never sees it.

Real: PostgreSQL (a migrated database behind the engine), the engine's consumer
(`EngineService.handle`) on the in-process bus. Our own seam is replaced: the
observation shell the message is routed to loses its compare-and-swap the first
times, as a handler racing another does. The message is handled on its first
delivery and acknowledged once; one that conflicts on every run is redelivered
like any failure (a conflict spends deliveries only once it outlasts the retries).
"""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from services.engine.service import EngineService
from services.engine.store import connect
from services.engine.store.migrate import migrate
from shared.bus import Delivery, Handler
from shared.bus.memory import MemoryBus
from shared.errors import ConflictError
from shared.messages import Message
from shared.plugins.registry import load_types
from shared.protocol import ENGINE_QUEUE, ResourceChanged
from shared.tasks import Supervisor
from tests.support.engine_settings import engine_settings
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


class LosesRaces:
    """Stands in for `Observing`: its first `conflicts` runs lose a compare-and-swap."""

    def __init__(self, conflicts: int) -> None:
        self.conflicts = conflicts
        self.runs = 0
        self.handled: list[str] = []

    async def changed(self, message: ResourceChanged) -> None:
        self.runs += 1
        if self.runs <= self.conflicts:
            raise ConflictError(f"resource {message.physical_id} changed concurrently; will retry")
        self.handled.append(message.physical_id)


async def engine_with(database_url: str, bus: MemoryBus, observing: LosesRaces) -> tuple[EngineService, Any]:
    pool = await connect(database_url, size=2)
    settings = engine_settings(
        conflict_attempts=5, conflict_pause_seconds=0.001, conflict_max_pause_seconds=0.01
    )
    engine = EngineService.from_settings(
        settings, pool=pool, bus=bus, types=load_types(), supervisor=Supervisor()
    )
    engine.observing = observing  # type: ignore[assignment]
    return engine, pool


def counting(engine: EngineService, deliveries: list[int]) -> Handler:
    """The engine's handler, noting the delivery attempt of each call."""

    async def handle(message: Message, delivery: Delivery) -> None:
        deliveries.append(delivery.attempt)
        await engine.handle(message, delivery)

    return handle


async def test_a_conflicting_engine_message_is_handled_on_its_first_delivery(
    database_url: str, db: asyncpg.Connection
) -> None:
    await migrate(db)
    bus = MemoryBus()
    observing = LosesRaces(conflicts=3)
    engine, pool = await engine_with(database_url, bus, observing)
    (consumption,) = engine.consumptions()
    deliveries: list[int] = []
    handler = counting(engine, deliveries)
    sub = await bus.consume(ENGINE_QUEUE, handler, prefetch=1, codec=consumption.codec)
    try:
        await bus.publish(ENGINE_QUEUE, ResourceChanged(provider="sandbox", physical_id="srv-1"))
        await eventually(lambda: observing.handled == ["srv-1"])
        await sub.stop()
        assert observing.runs == 4
        assert deliveries == [1], "the conflicts never reached the bus"
        assert await bus.depth(ENGINE_QUEUE) == 0, "acknowledged, not given back"
        assert await bus.dead_letters(ENGINE_QUEUE) == []
    finally:
        await sub.stop()
        await pool.close()


async def test_a_conflict_that_outlasts_the_retries_spends_a_delivery(
    database_url: str, db: asyncpg.Connection
) -> None:
    await migrate(db)
    bus = MemoryBus()
    observing = LosesRaces(conflicts=5)  # every run of the first delivery
    engine, pool = await engine_with(database_url, bus, observing)
    (consumption,) = engine.consumptions()
    deliveries: list[int] = []
    handler = counting(engine, deliveries)
    sub = await bus.consume(ENGINE_QUEUE, handler, prefetch=1, codec=consumption.codec)
    try:
        await bus.publish(ENGINE_QUEUE, ResourceChanged(provider="sandbox", physical_id="srv-2"))
        await eventually(lambda: observing.handled == ["srv-2"])
        await sub.stop()
        assert observing.runs == 6  # five on the first delivery, one on the second
        assert deliveries == [1, 2]
        assert await bus.dead_letters(ENGINE_QUEUE) == []
    finally:
        await sub.stop()
        await pool.close()
