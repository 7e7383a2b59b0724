"""The engine counts every statement it sends PostgreSQL (`store.db.connect(on_statement=...)`).

Real: PostgreSQL and the engine's pool. The count is what `/metrics` shows as
`converge_engine_db_statements_total` and what `make bench-quick` divides by resources.
"""

from __future__ import annotations

import asyncio

from services.engine.store.db import connect


async def test_each_statement_a_connection_sends_is_counted_once(database_url: str) -> None:
    sent: list[None] = []
    pool = await connect(database_url, size=1, on_statement=lambda: sent.append(None))
    try:
        async with pool.acquire() as conn:
            await asyncio.sleep(0)  # what opening the connection sent is counted by now
            before = len(sent)
            async with conn.transaction():
                assert await conn.fetchval("SELECT 1") == 1
                await conn.execute("SELECT pg_sleep(0)")
            await asyncio.sleep(0)  # asyncpg reports each statement on the loop's next turn
            assert len(sent) - before == 4, "BEGIN, the two statements, COMMIT"
    finally:
        await pool.close()
