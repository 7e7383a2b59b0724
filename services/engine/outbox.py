"""The transactional outbox: messages leave only after their cause committed.

Every message the engine emits is first written to `outbox` in the same
transaction as the state change that caused it. After commit the engine
publishes them at once and deletes the rows (the fast path). If it dies in
between, any engine's relay (`relay_forever`) publishes its rows as soon as
its lease is gone (services/engine/store/lease.py), and any row older than
`stale_after` seconds. A message may thus be published twice, never lost
before it reaches the bus; receivers are idempotent (inbox, job ids). What
the in-process bus of `converge up` holds dies with the process: the work it
carried is sent again from the database by recovery (services/engine/recovery.py),
and the rows this relay publishes for the dead process duplicate some of it,
harmlessly.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg
import structlog

from services.engine.store.db import CONNECT_ERRORS
from services.engine.store.lease import LEASE_CLASS, LEASE_KEY_SQL
from shared.bus import Bus
from shared.errors import BusError, StoreUnavailable

log = structlog.get_logger(__name__)

# Whatever a broker or database outage raises here; the rows stay for the relay.
_UNAVAILABLE = (BusError, StoreUnavailable, asyncpg.PostgresError, *CONNECT_ERRORS)
# The lease key of the engine that wrote an outbox row.
_WRITER_KEY = LEASE_KEY_SQL.format(column="engine_id")


class Outbox:
    def __init__(self, *, pool: asyncpg.Pool, bus: Bus, stale_after: float = 5.0) -> None:
        self._pool = pool
        self._bus = bus
        self._stale_after = stale_after

    async def publish(self, ids: Sequence[int], messages: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """Fast path, right after commit. Failures are left to the relay."""
        if not ids:
            return
        try:
            await self._send(messages)
            await self._pool.execute("DELETE FROM outbox WHERE outbox_id = ANY($1::bigint[])", list(ids))
        except _UNAVAILABLE as exc:
            log.warning("outbox_fast_path_failed", error=str(exc), count=len(ids))

    async def _send(self, messages: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """Publish `messages` together: one confirm wait for all of them."""
        await self._bus.publish_raw_batch(
            [(queue, json.dumps(body, separators=(",", ":")).encode()) for queue, body in messages]
        )

    async def relay_once(self, *, limit: int = 500) -> int:
        """Publish the rows of engines that died (their lease is free: taking it
        for this transaction succeeds) and rows older than `stale_after` (a
        fast path that failed, or a writer without a lease)."""
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(
                f"""WITH writers AS (SELECT DISTINCT engine_id FROM outbox WHERE engine_id IS NOT NULL),
                        dead AS (SELECT engine_id FROM writers
                                 WHERE pg_try_advisory_xact_lock($3, {_WRITER_KEY}))
                   SELECT outbox_id, queue, body FROM outbox
                   WHERE created_at < now() - make_interval(secs => $1)
                      OR engine_id IN (SELECT engine_id FROM dead)
                   ORDER BY outbox_id LIMIT $2 FOR UPDATE SKIP LOCKED""",
                self._stale_after,
                limit,
                LEASE_CLASS,
            )
            if not rows:
                return 0
            await self._send([(r["queue"], r["body"]) for r in rows])
            await conn.execute(
                "DELETE FROM outbox WHERE outbox_id = ANY($1::bigint[])", [r["outbox_id"] for r in rows]
            )
        log.info("outbox_relayed", count=len(rows))
        return len(rows)

    async def relay_forever(self, *, every: float = 1.0) -> None:
        while True:
            try:
                while await self.relay_once() > 0:
                    pass
            except _UNAVAILABLE as exc:
                log.warning("outbox_relay_failed", error=str(exc))
            await asyncio.sleep(every)
