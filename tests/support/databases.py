"""Create and drop per-test databases on the test PostgreSQL server; a store on one."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from services.engine.store import Store, connect
from services.engine.store.migrate import migrate


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


async def create_database(server_url: str, name: str) -> str:
    conn = await asyncpg.connect(server_url)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return with_database(server_url, name)


async def drop_database(server_url: str, name: str) -> None:
    conn = await asyncpg.connect(server_url)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def store_with_stack(
    database_url: str, stack_id: uuid.UUID, *, action: str, pool_size: int = 2
) -> AsyncIterator[Store]:
    """The engine's store on a migrated database holding one stack row (project `p`),
    `action` IN_PROGRESS: for tests of the store's statements on their own."""
    pool = await connect(database_url, size=pool_size)
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
            await conn.execute(
                """INSERT INTO stacks (stack_id, project_id, name, action, status, root_stack_id)
                   VALUES ($1, 'p', 's', $2, 'IN_PROGRESS', $1)""",
                stack_id,
                action,
            )
        yield Store(pool)
    finally:
        await pool.close()
