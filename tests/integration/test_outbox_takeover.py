"""A dead engine's outbox rows are published by a live engine at once.

Real PostgreSQL, two engines' pools: engine A writes outbox rows while holding
its lease; engine B's relay leaves them alone while A lives (they are not
stale: `stale_after` is far away), and publishes them as soon as A's
connections are gone, as a SIGKILL leaves them. The bus is in-process: only
what the relay publishes is under test.
"""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

from services.engine.outbox import Outbox
from services.engine.store import Store, connect
from services.engine.store.lease import EngineLease
from services.engine.store.migrate import migrate
from shared.bus.memory import MemoryBus

pytestmark = pytest.mark.integration

NEVER_STALE = 3600.0


async def write_rows(store: Store, count: int) -> None:
    async with store.transaction() as tx:
        await tx.add_outbox([("engine", {"n": i}) for i in range(count)])


async def test_a_dead_engines_rows_are_relayed_without_waiting_for_them_to_go_stale(
    database_url: str, db: asyncpg.Connection
) -> None:
    await migrate(db)
    pool_a = await connect(database_url, size=2)
    pool_b = await connect(database_url, size=2)
    bus = MemoryBus()
    engine_a = uuid.uuid4()
    lease = EngineLease(pool_a, engine_a, check_every=0.2)
    holding = asyncio.create_task(lease.hold())
    relay_b = Outbox(pool=pool_b, bus=bus, stale_after=NEVER_STALE)
    try:
        await asyncio.wait_for(lease.held.wait(), timeout=30)
        await write_rows(Store(pool_a, engine_id=engine_a), 3)
        await write_rows(Store(pool_a), 1)  # written without a lease: only staleness frees it

        assert await relay_b.relay_once() == 0, "a live engine's rows are its own to publish"

        holding.cancel()
        pool_a.terminate()  # as a SIGKILL leaves it: every connection of engine A gone
        async with asyncio.timeout(30):  # the server notices the closed connections at once
            while True:
                if await relay_b.relay_once() > 0:
                    break
                await asyncio.sleep(0.05)
        assert await bus.depth("engine") == 3
        assert await db.fetchval("SELECT count(*) FROM outbox") == 1, "the unleased row waits"
    finally:
        holding.cancel()
        pool_a.terminate()
        await pool_b.close()
