"""asyncpg pool and the `Store` gateway: transactions, the engine registry, heartbeats, pruning.

Driver errors are wrapped here: connection problems become
`StoreUnavailable` (transient) — including the server going away under a
query (shutdown, restart, crash) and refusing connections while it starts;
the pool opens fresh connections once the server is back. `Store.transaction`
hands out a `Tx` (`store/tx.py`), which composes the statement families of the
other modules here (stacks, resources, the traversal graph, events, inbox and
outbox, ...); the API's reads are in `store/queries.py`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg

from services.engine.store.driver import PooledConnection, given_back_clean
from services.engine.store.tx import Tx
from shared.errors import ConflictError, StoreUnavailable
from shared.waiting import keep_trying

CONNECT_ERRORS = (
    OSError,
    asyncpg.exceptions.CannotConnectNowError,  # starting up, shutting down, in recovery
    asyncpg.exceptions.PostgresConnectionError,  # e.g. the connection died mid-query
    asyncpg.exceptions.AdminShutdownError,  # the server is stopping (fast or immediate)
    asyncpg.exceptions.CrashShutdownError,  # another backend crashed: the server restarts
    asyncpg.InterfaceError,
    # The connection was cut mid-operation and asyncpg's own state machine
    # refuses the next step (e.g. the rollback): the pool replaces it.
    asyncpg.exceptions.InternalClientError,
    asyncpg.exceptions.InvalidCatalogNameError,
    TimeoutError,
)

#: What a statement run outside `Store`'s wrapping raises when the database refuses it
#: or is gone; a caller that leaves its work for later (the outbox relay) catches these.
DATABASE_ERRORS = (asyncpg.PostgresError, *CONNECT_ERRORS)


async def connect(
    url: str,
    *,
    size: int = 10,
    application_name: str = "converge",
    wait: float = 0.0,
    on_statement: Callable[[], object] | None = None,
) -> asyncpg.Pool:
    """Open a pool to `url`, trying again for up to `wait` seconds while the server
    is not reachable; then raise `StoreUnavailable` naming what failed (at once for
    a database that does not exist). Connections carry `application_name`, so
    operators see which service holds them. `on_statement` is called once for every
    statement a connection sends after it opened (`BEGIN`, `COMMIT` and the pool's
    reset of a connection given back included)."""

    async def attempt() -> asyncpg.Pool:
        pool: asyncpg.Pool = await asyncpg.create_pool(
            url,
            min_size=1,
            max_size=size,
            timeout=10,
            command_timeout=60,
            init=functools.partial(_init_connection, on_statement=on_statement),
            connection_class=PooledConnection,
            server_settings={"application_name": application_name},
        )
        return pool

    # A database that does not exist will not appear by waiting.
    transient = tuple(e for e in CONNECT_ERRORS if e is not asyncpg.exceptions.InvalidCatalogNameError)
    try:
        return await keep_trying(
            attempt, retry_on=transient, wait=wait, waiting_event="waiting_for_postgresql"
        )
    except CONNECT_ERRORS as exc:
        raise StoreUnavailable(f"cannot connect to PostgreSQL: {exc}") from exc


async def _init_connection(
    conn: asyncpg.Connection, *, on_statement: Callable[[], object] | None = None
) -> None:
    for kind in ("json", "jsonb"):
        await conn.set_type_codec(kind, encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
    if on_statement is not None:

        def counted(_query: Any) -> None:  # asyncpg calls it soon after each statement, on the loop
            on_statement()

        conn.add_query_logger(counted)


class Store:
    """All of the engine's database access goes through this gateway."""

    def __init__(self, pool: asyncpg.Pool, *, engine_id: uuid.UUID | None = None) -> None:
        """`engine_id`: the engine whose lease covers the outbox rows written here."""
        self._pool = pool
        self._engine_id = engine_id

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Tx]:
        """One transaction; every convergence effect commits through one of these."""
        try:
            async with self._pool.acquire() as conn:
                async with conn.transaction():
                    tx = Tx(conn, engine_id=self._engine_id)
                    yield tx
                    await tx.flush_writes()  # row writes a batch held back (store/row_writes.py)
                given_back_clean(conn)  # committed: the pool need not reset it
        except CONNECT_ERRORS as exc:
            raise StoreUnavailable(f"database unavailable: {exc}") from exc
        except (asyncpg.exceptions.SerializationError, asyncpg.exceptions.DeadlockDetectedError) as exc:
            raise ConflictError(f"concurrent update: {exc}") from exc

    async def ping(self) -> bool:
        try:
            return bool(await self._pool.fetchval("SELECT 1"))
        except DATABASE_ERRORS:
            return False

    async def register_engine(self, engine_id: uuid.UUID, *, hostname: str, pid: int) -> None:
        await self._execute(
            """INSERT INTO engines (engine_id, hostname, pid) VALUES ($1, $2, $3)
               ON CONFLICT (engine_id) DO UPDATE SET heartbeat_at = now()""",
            engine_id,
            hostname,
            pid,
        )

    async def heartbeat(self, engine_id: uuid.UUID) -> None:
        await self._execute("UPDATE engines SET heartbeat_at = now() WHERE engine_id = $1", engine_id)

    async def unregister_engine(self, engine_id: uuid.UUID) -> None:
        await self._execute("DELETE FROM engines WHERE engine_id = $1", engine_id)

    async def prune(self, *, inbox_seconds: float, traversal_seconds: float) -> tuple[int, int]:
        """Drop superseded traversal graphs started more than `traversal_seconds` ago and
        the ids of messages handled more than `inbox_seconds` ago; (traversals, inbox
        rows) removed.

        A superseded traversal is kept a little while: checks of it may still
        be committing, and they stop quietly once its rows are gone. One that is
        the base of another (`store/graph.py`) is kept as long as that one is.
        """
        traversals = await self._execute(
            """DELETE FROM traversals t USING stacks s
               WHERE t.stack_id = s.stack_id AND t.traversal_id IS DISTINCT FROM s.current_traversal
                 AND t.created_at < now() - make_interval(secs => $1)
                 AND NOT EXISTS (SELECT 1 FROM traversals k WHERE k.base = t.traversal_id)""",
            traversal_seconds,
        )
        inbox = await self._execute(
            "DELETE FROM inbox WHERE processed_at < now() - make_interval(secs => $1)", inbox_seconds
        )
        return int(traversals.split()[-1]), int(inbox.split()[-1])

    async def live_engines(self, *, within_seconds: float) -> list[uuid.UUID]:
        rows = await self._fetch(
            """SELECT engine_id FROM engines
               WHERE heartbeat_at > now() - make_interval(secs => $1) ORDER BY started_at""",
            within_seconds,
        )
        return [row["engine_id"] for row in rows]

    async def _execute(self, sql: str, *args: Any) -> str:
        try:
            return str(await self._pool.execute(sql, *args))
        except CONNECT_ERRORS as exc:
            raise StoreUnavailable(f"database unavailable: {exc}") from exc

    async def _fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        try:
            return list(await self._pool.fetch(sql, *args))
        except CONNECT_ERRORS as exc:
            raise StoreUnavailable(f"database unavailable: {exc}") from exc
