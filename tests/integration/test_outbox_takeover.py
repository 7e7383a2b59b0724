"""A dead engine's outbox rows are published by a live engine at once.

Real PostgreSQL, two engines' pools: engine A writes outbox rows while holding
its lease; engine B's relay leaves them alone while A lives (they are not
stale: `stale_after` is far away), and publishes them as soon as A's
connections are gone, as a SIGKILL leaves them. The bus is in-process: only
what the relay publishes is under test. An engine whose lease key is busy
(a relay is checking it) waits and takes the lease once the key is free.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import asyncpg
import pytest
import structlog.testing

from services.engine.outbox import LIVE_WRITER_GRACE, Outbox
from services.engine.store import Store, connect
from services.engine.store.lease import LEASE_CLASS, EngineLease, lease_key
from services.engine.store.migrate import migrate
from shared.bus.memory import MemoryBus
from shared.errors import BusError
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

NEVER_STALE = 3600.0


async def write_rows(store: Store, count: int) -> list[int]:
    async with store.transaction() as tx:
        return await tx.add_outbox([("engine", f'{{"n":{i}}}') for i in range(count)])


class HeldBus(MemoryBus):
    """A bus whose first publish waits until `release`, then fails (the broker went
    away for a moment) or goes through; the publishes after it go through."""

    def __init__(self) -> None:
        super().__init__()
        self.publishing = asyncio.Event()
        self._released: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

    def release(self, *, fail: bool) -> None:
        self._released.set_result(fail)

    async def publish_raw_batch(self, bodies: Sequence[tuple[str, bytes]]) -> None:
        first = not self.publishing.is_set()
        self.publishing.set()
        if first and await asyncio.shield(self._released):
            raise BusError("the broker went away")
        await super().publish_raw_batch(bodies)


@dataclass
class EngineA:
    """Engine A, holding its lease on its own pool, and the pool of another engine, B."""

    engine_id: uuid.UUID
    pool: asyncpg.Pool
    pool_b: asyncpg.Pool
    holding: asyncio.Task[None]

    def kill(self) -> None:
        """As a SIGKILL leaves engine A: every connection gone, its lease with them."""
        self.holding.cancel()
        self.pool.terminate()


@contextlib.asynccontextmanager
async def engine_a_leased(database_url: str, db: asyncpg.Connection) -> AsyncIterator[EngineA]:
    await migrate(db)
    pool_a = await connect(database_url, size=3)
    pool_b = await connect(database_url, size=2)
    engine_id = uuid.uuid4()
    lease = EngineLease(pool_a, engine_id, check_every=0.2)
    engine = EngineA(engine_id, pool_a, pool_b, asyncio.create_task(lease.hold()))
    try:
        await asyncio.wait_for(lease.held.wait(), timeout=30)
        yield engine
    finally:
        engine.kill()
        await pool_b.close()


async def aged(db: asyncpg.Connection, seconds: float) -> None:
    """Every outbox row written `seconds` ago (time passing, without waiting for it)."""
    await db.execute("UPDATE outbox SET created_at = now() - make_interval(secs => $1)", seconds)


async def test_a_dead_engines_rows_are_relayed_without_waiting_for_them_to_go_stale(
    database_url: str, db: asyncpg.Connection
) -> None:
    bus = MemoryBus()
    async with engine_a_leased(database_url, db) as a:
        relay_b = Outbox(pool=a.pool_b, bus=bus, stale_after=NEVER_STALE)
        await write_rows(Store(a.pool, engine_id=a.engine_id), 3)
        await write_rows(Store(a.pool), 1)  # written without a lease: only staleness frees it

        assert await relay_b.relay_once() == 0, "a live engine's rows are its own to publish"

        a.kill()
        await eventually(relay_b.relay_once)  # the server notices the closed connections at once
        assert await bus.depth("engine") == 3
        assert await db.fetchval("SELECT count(*) FROM outbox") == 1, "the unleased row waits"


async def test_an_engine_takes_its_lease_once_the_key_is_free(
    database_url: str, db: asyncpg.Connection
) -> None:
    engine = uuid.uuid4()
    # Another session holds the key, as a relay checking whether this engine is dead does.
    await db.execute("SELECT pg_advisory_lock($1, $2)", LEASE_CLASS, lease_key(engine))
    pool = await connect(database_url, size=2)
    lease = EngineLease(pool, engine, check_every=0.05)
    with structlog.testing.capture_logs() as logs:
        holding = asyncio.create_task(lease.hold())
        try:
            await eventually(lambda: any(e["event"] == "engine_lease_busy" for e in logs), timeout=30)
            assert not lease.held.is_set()
            await db.execute("SELECT pg_advisory_unlock($1, $2)", LEASE_CLASS, lease_key(engine))
            await asyncio.wait_for(lease.held.wait(), timeout=30)
            holder = await db.fetchval(
                """SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                   WHERE l.locktype = 'advisory' AND l.granted
                     AND a.datname = current_database()"""
            )
            assert holder == "converge", "the engine's own pooled connection holds it"
        finally:
            holding.cancel()
            await pool.close()


async def test_a_live_engines_rows_are_relayed_by_itself_unless_its_fast_path_is_publishing_them(
    database_url: str, db: asyncpg.Connection
) -> None:
    """A fast path slower than `stale_after` (the leaf checks of a wide stack) is not
    published a second time: the rows are their live engine's, and its own relay leaves
    the ones its fast path holds. Once that publish fails, the relay takes them; another
    engine's relay only when they are `LIVE_WRITER_GRACE` times older."""
    bus = HeldBus()
    async with engine_a_leased(database_url, db) as a:
        outbox_a = Outbox(pool=a.pool, bus=bus, stale_after=1.0, engine_id=a.engine_id)
        relay_b = Outbox(pool=a.pool_b, bus=MemoryBus(), stale_after=1.0, engine_id=uuid.uuid4())
        ids = await write_rows(Store(a.pool, engine_id=a.engine_id), 3)
        fast_path = asyncio.create_task(outbox_a.publish(ids, [("engine", "{}")] * 3))
        await asyncio.wait_for(bus.publishing.wait(), timeout=30)
        await aged(db, 2.0)  # stale, while the fast path still publishes them

        assert await outbox_a.relay_once() == 0, "the fast path is publishing them"
        assert await relay_b.relay_once() == 0, "a live engine's rows are its own"

        bus.release(fail=True)
        await fast_path
        assert await outbox_a.relay_once() == 3, "its fast path failed: its relay sends them"
        assert await db.fetchval("SELECT count(*) FROM outbox") == 0

        await write_rows(Store(a.pool, engine_id=a.engine_id), 2)
        await aged(db, 1.0 * LIVE_WRITER_GRACE + 1)  # as if A's relay were stuck
        assert await relay_b.relay_once() == 2


async def test_an_outbox_rows_age_counts_from_its_writing_not_from_its_transactions_start(
    database_url: str, db: asyncpg.Connection
) -> None:
    """The messages a long transaction (a large stack's create) writes at its end are
    not already stale when it commits."""
    await migrate(db)
    pool = await connect(database_url, size=2)
    try:
        before = await db.fetchval("SELECT clock_timestamp()")
        async with Store(pool).transaction() as tx:
            await asyncio.sleep(0.3)  # the transaction's work before it writes its messages
            await tx.add_outbox([("engine", "{}")])
        written = await db.fetchval("SELECT created_at FROM outbox")
        assert (written - before).total_seconds() >= 0.3
    finally:
        await pool.close()
