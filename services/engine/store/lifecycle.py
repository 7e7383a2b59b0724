"""Opening the engine's database: configured URL or embedded, then migrated.

Shared by `converge-engine` and `converge up`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import asyncpg
import structlog
from prometheus_client import CollectorRegistry, Counter

from services.engine.store.db import connect
from services.engine.store.embedded import start_embedded
from services.engine.store.migrate import migrate
from shared.settings import EngineSettings

log = structlog.get_logger(__name__)


@contextlib.asynccontextmanager
async def open_database(
    settings: EngineSettings, *, registry: CollectorRegistry | None = None
) -> AsyncIterator[asyncpg.Pool]:
    """The pool, on the configured URL or on embedded PostgreSQL; migrated. Its
    statements are counted in `registry` (`converge_engine_db_statements_total`: the
    load this engine puts on PostgreSQL, and what a benchmark divides by resources)."""
    statements = Counter(
        "converge_engine_db_statements",
        "Statements this engine sent PostgreSQL (queries, BEGIN and COMMIT, the pool's resets).",
        registry=registry if registry is not None else CollectorRegistry(),
    )
    async with contextlib.AsyncExitStack() as stack:
        url = settings.database_url
        if url is None:
            embedded = await start_embedded(settings.data_dir)
            stack.push_async_callback(embedded.stop)
            url = embedded.url
            log.info("embedded_postgres", data_dir=str(settings.data_dir))
        pool = await connect(
            url,
            size=settings.db_pool_size,
            application_name="converge-engine",
            wait=settings.connect_wait_seconds,
            on_statement=statements.inc,
        )
        stack.push_async_callback(pool.close)
        async with pool.acquire() as conn:
            applied = await migrate(conn)
        if applied:
            log.info("migrations_applied", versions=applied)
        yield pool
