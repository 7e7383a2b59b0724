"""The store turns a connection cut at any moment into `StoreUnavailable`.

The engine's loops and handlers retry `StoreUnavailable` and let anything
else crash the service, so every way asyncpg reports a connection killed
under a transaction must arrive as that one error. Real PostgreSQL: the
server terminates the engine's backend while a transaction runs.
"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from services.engine.store import Store, connect
from services.engine.store.migrate import migrate
from shared.errors import StoreUnavailable

pytestmark = pytest.mark.integration


async def test_a_backend_terminated_at_any_point_of_a_transaction_is_store_unavailable(
    database_url: str, db: asyncpg.Connection
) -> None:
    await migrate(db)
    pool = await connect(database_url, size=2, application_name="victim")
    store = Store(pool)
    raised: list[BaseException | None] = []
    try:
        for attempt in range(16):  # the kill lands at a different point of the transaction each time

            async def kill(after: float) -> None:
                await asyncio.sleep(after)
                await db.execute(
                    """SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                       WHERE datname = current_database() AND application_name = 'victim'"""
                )

            killer = asyncio.create_task(kill(attempt * 0.01))
            error: BaseException | None = None
            try:
                async with store.transaction() as tx:
                    for i in range(2000):
                        await tx.claim_message(f"{attempt}-{i}")
            except Exception as exc:  # noqa: BLE001 - the test records what was raised
                error = exc
            await killer
            raised.append(error)
    finally:
        await pool.close()
    others = [repr(e) for e in raised if e is not None and not isinstance(e, StoreUnavailable)]
    assert not others, f"not StoreUnavailable: {others}"
    assert sum(isinstance(e, StoreUnavailable) for e in raised) >= 8, raised
