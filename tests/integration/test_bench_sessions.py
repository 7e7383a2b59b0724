"""The engine profile's session sampling (bench/harness/sessions.py) sees what the
services' database sessions are doing: a transaction held up by another's row lock
counts as waiting for a lock, named by its statement; one the service has left
between statements counts as idle in a transaction; other applications' sessions
are not counted.

Real: PostgreSQL (a scratch database), sessions opened with the services'
`application_name`, a row lock held by one and waited for by another.
"""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from bench.harness.sessions import Sessions, sampled

pytestmark = pytest.mark.integration


async def _until(seen: Sessions, state: str, *, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while seen.seen[state] == 0:
        assert time.monotonic() < deadline, f"no session seen {state} in {timeout} s: {seen}"
        await asyncio.sleep(0.01)


async def test_a_session_held_up_by_a_row_lock_is_seen_waiting_for_it_and_named(database_url: str) -> None:
    settings = {"application_name": "converge-engine"}
    holder = await asyncpg.connect(database_url, server_settings=settings)
    waiter = await asyncpg.connect(database_url, server_settings=settings)
    other = await asyncpg.connect(database_url, server_settings={"application_name": "psql"})
    try:
        await holder.execute("CREATE TABLE nodes (id int PRIMARY KEY, done bool)")
        await holder.execute("INSERT INTO nodes VALUES (1, false)")
        async with sampled(database_url) as seen:
            await other.execute("BEGIN")  # idle in a transaction, but not a service's
            await holder.execute("BEGIN")
            await holder.execute("UPDATE nodes SET done = true WHERE id = 1")
            await _until(seen, "idle in transaction")
            waiting = asyncio.create_task(waiter.execute("UPDATE nodes SET done = false WHERE id = 1"))
            await _until(seen, "waiting for a lock")
            await holder.execute("COMMIT")
            await waiting
        assert seen.most_seen("waiting for a lock") == ("UPDATE nodes SET done = false", 1.0)
        assert seen.statements["idle in transaction"]["UPDATE nodes SET done = true"] > 0, seen
        # Only the two services' sessions were ever seen: one idle, one waiting, at most.
        assert max(seen.seen.values()) <= seen.samples, seen
        assert 0 < seen.mean("waiting for a lock") <= 1
    finally:
        for conn in (holder, waiter, other):
            await conn.close()
