"""Create and drop per-test databases on the test PostgreSQL server."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import asyncpg


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
