"""A connection given back to the engine's pool is reset only when what it carried could
have left something in the session (`store.driver.PooledConnection`).

Real: PostgreSQL and the engine's pool of one connection, whose statements are recorded
as asyncpg sends them. A committed transaction of the store and the outbox's fast-path
delete give theirs back as they are; a transaction that fails, and a connection that took
a session-level lock (as the engine's lease does), are reset, and the lock is let go of.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import asyncpg
import pytest

from services.engine.store.db import Store, connect
from services.engine.store.migrate import migrate
from services.engine.store.outbox import OutboxRows
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

RESET = "pg_advisory_unlock_all"  # the first statement of asyncpg's reset


@dataclass
class Pool:
    """The engine's pool (one connection) and every statement that connection sent."""

    pool: asyncpg.Pool
    sent: list[str] = field(default_factory=list)

    def saw(self, logged: asyncpg.connection.LoggedQuery) -> None:
        self.sent.append(logged.query)

    async def settled(self, last: str) -> list[str]:
        """The statements sent since the last call, once `last` (a statement that ends
        what the test did) is among them; asyncpg reports each soon after it answered."""
        await eventually(lambda: any(last in s for s in self.sent), what=f"{last!r} sent")
        sent, self.sent = self.sent, []
        return sent

    async def given_back(self) -> list[str]:
        """What the connection sent from the last call until it was next taken from the
        pool (to run a statement of this test's): a reset would be among them."""
        async with self.pool.acquire() as conn:
            await conn.execute("SELECT 'taken again'")
        sent = await self.settled("taken again")
        return sent[: next(i for i, s in enumerate(sent) if "taken again" in s)]


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[Pool]:
    raw = await connect(database_url, size=1)
    try:
        watched = Pool(raw)
        async with raw.acquire() as conn:
            await migrate(conn)
            conn.add_query_logger(watched.saw)
            await conn.execute("SELECT 'ready'")
        await watched.settled(RESET)  # this first give-back is reset: nothing said otherwise
        yield watched
    finally:
        await raw.close()


async def test_a_committed_transaction_gives_its_connection_back_without_the_reset(pool: Pool) -> None:
    async with Store(pool.pool).transaction() as tx:
        assert await tx.claim_messages(["m-1"]) == {"m-1"}
    sent = await pool.given_back()
    assert any("COMMIT" in s for s in sent), sent
    assert not [s for s in sent if RESET in s], sent


async def test_a_transaction_that_fails_is_rolled_back_and_reset(pool: Pool) -> None:
    async def failing() -> None:
        async with Store(pool.pool).transaction() as tx:
            await tx.claim_messages(["m-2"])
            raise RuntimeError("the handler failed")

    with pytest.raises(RuntimeError):
        await failing()
    sent = await pool.given_back()
    assert any("ROLLBACK" in s for s in sent), sent
    assert [s for s in sent if RESET in s], sent
    async with Store(pool.pool).transaction() as tx:  # nothing of it was kept
        assert await tx.claim_messages(["m-2"]) == {"m-2"}


async def test_a_session_lock_is_let_go_when_its_connection_is_given_back(
    pool: Pool, database_url: str
) -> None:
    async with pool.pool.acquire() as conn:  # as the engine's lease holds its lock
        assert await conn.fetchval("SELECT pg_try_advisory_lock(7, 11)")
    await pool.settled(RESET)
    other = await asyncpg.connect(database_url)
    try:
        assert await other.fetchval("SELECT pg_try_advisory_lock(7, 11)"), "the reset let the lock go"
    finally:
        await other.close()


async def test_the_outboxs_fast_path_delete_gives_its_connection_back_without_the_reset(pool: Pool) -> None:
    async with pool.pool.acquire() as conn:
        outbox_id = await conn.fetchval(
            "INSERT INTO outbox (queue, body) VALUES ('engine', '{}'::jsonb) RETURNING outbox_id"
        )
    await pool.settled(RESET)
    await OutboxRows(pool.pool).delete([outbox_id])
    sent = await pool.given_back()
    assert any("DELETE FROM outbox" in s for s in sent), sent
    assert not [s for s in sent if RESET in s], sent
    async with pool.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM outbox") == 0
