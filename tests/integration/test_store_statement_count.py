"""The engine counts every statement it sends PostgreSQL (`store.db.connect(on_statement=...)`).

Real: PostgreSQL and the engine's pool. The count is what `/metrics` shows as
`converge_engine_db_statements_total` and what `make bench-quick` divides by resources.
"""

from __future__ import annotations

from services.engine.store.db import connect
from tests.support.waiting import eventually


async def test_each_statement_a_connection_sends_is_counted_once(database_url: str) -> None:
    sent: list[None] = []
    pool = await connect(database_url, size=1, on_statement=lambda: sent.append(None))
    try:
        async with pool.acquire() as conn:
            assert not sent, "opening the connection is not counted"
            async with conn.transaction():
                assert await conn.fetchval("SELECT 1") == 1
                await conn.execute("SELECT pg_sleep(0)")
            # asyncpg reports each statement on the loop, after it answered.
            await eventually(lambda: len(sent) >= 4, what="the transaction's statements counted")
            assert len(sent) == 4, "BEGIN, the two statements, COMMIT: each once"
    finally:
        await pool.close()
