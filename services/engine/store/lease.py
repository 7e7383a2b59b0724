"""An engine's lease: proof, readable by other engines, that it is alive.

Where it sits: `EngineService.start` runs `EngineLease.hold` as a supervised
task; the outbox relay (services/engine/outbox.py) asks whether the engine
that wrote a row still holds its lease, and publishes the rows of one that
does not at once. The lease is a session-level advisory lock held on one
pooled connection for the engine's life: when the engine process dies, its
connections close and PostgreSQL releases the lock within moments, much
sooner than any heartbeat timeout. An engine whose lease connection was cut
is briefly taken for dead (its rows may be published twice; receivers
dedupe) until `hold` takes the lease again.
"""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import structlog

from services.engine.store.advisory import uuid_key
from services.engine.store.db import CONNECT_ERRORS

log = structlog.get_logger(__name__)

# Advisory lock keys are (class, object) pairs of int4; the class marks Converge
# engine leases, the object is the first 4 bytes of the engine id.
LEASE_CLASS = 0x436E7645

# The same object key, computed in SQL from a uuid column.
LEASE_KEY_SQL = "('x' || substr(replace({column}::text, '-', ''), 1, 8))::bit(32)::int"


lease_key = uuid_key  # an engine's lease: the key of its id


class EngineLease:
    def __init__(self, pool: asyncpg.Pool, engine_id: uuid.UUID, *, check_every: float = 2.0) -> None:
        self._pool = pool
        self._engine_id = engine_id
        self._check_every = check_every
        self.held = asyncio.Event()

    async def hold(self) -> None:
        """Take the lease and keep it, taking it again after its connection is cut.
        Cancelling returns the connection to the pool, whose reset unlocks it."""
        while True:
            try:
                async with self._pool.acquire() as conn:
                    # Busy while another engine's relay checks whether we are dead
                    # (it holds the key for its transaction), or, 1 in 2**32, while
                    # a live engine's id starts with the same 4 bytes.
                    while not await conn.fetchval(
                        "SELECT pg_try_advisory_lock($1, $2)", LEASE_CLASS, lease_key(self._engine_id)
                    ):
                        log.warning("engine_lease_busy", engine_id=str(self._engine_id))
                        await asyncio.sleep(self._check_every)
                    self.held.set()
                    while True:
                        await asyncio.sleep(self._check_every)
                        await conn.fetchval("SELECT 1")
            except CONNECT_ERRORS as exc:
                self.held.clear()
                log.warning("engine_lease_lost", error=str(exc))
                await asyncio.sleep(self._check_every)
