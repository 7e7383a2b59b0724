"""Create and drop per-test databases on the test PostgreSQL server; a store on one."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any
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


async def layered_rows(conn: Any, *, project: str, name: str, rows: int, width: int) -> uuid.UUID:
    """A stack of `rows` resource rows of `project`, written with SQL (no engine): in
    layers of `width`, r{i} requiring r{i - width} and r{i - width + 1}. Its id."""
    stack_id = uuid.uuid4()
    await conn.execute(
        "INSERT INTO stacks (stack_id, project_id, name, action, status, root_stack_id) "
        "VALUES ($1, $2, $3, 'CREATE', 'COMPLETE', $1)",  # its own tree's root
        stack_id,
        project,
        name,
    )
    await conn.execute(
        """INSERT INTO resources (stack_id, name, type, physical_id, action, status)
           SELECT $1, 'r' || i, 'OS::Heat::None', 'p-' || i, 'CREATE', 'COMPLETE'
           FROM generate_series(0, $2 - 1) i""",
        stack_id,
        rows,
    )
    await conn.execute(
        """UPDATE resources r SET requires = ARRAY[a.resource_id, b.resource_id]
           FROM resources a, resources b
           WHERE r.stack_id = $1 AND a.stack_id = $1 AND b.stack_id = $1
             AND a.name = 'r' || (substr(r.name, 2)::int - $2)
             AND b.name = 'r' || (substr(r.name, 2)::int - $2 + 1)""",
        stack_id,
        width,
    )
    return stack_id
