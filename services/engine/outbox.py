"""The transactional outbox: messages leave only after their cause committed.

Every message the engine emits is first written to `outbox` in the same
transaction as the state change that caused it. After commit the engine
publishes them at once and deletes the rows (the fast path). If it dies in
between, any engine's relay (`relay_forever`) publishes its rows as soon as
its lease is gone (services/engine/store/lease.py). A live engine's rows are
its own: its relay publishes those older than `stale_after` seconds that its
fast path is not publishing now (the fast path failed), and those of no
engine; another engine's relay takes them only once they are
`LIVE_WRITER_GRACE` times older (that engine's relay is stuck). So a fast path
that takes long (the ten thousand leaf checks of a wide stack's create) is
not published a second time beside it. A message may still be published
twice, never lost before it reaches the bus; receivers are idempotent
(inbox, job ids). What the in-process bus of `converge up` holds dies with
the process: the work it
carried is sent again from the database by recovery (services/engine/recovery.py),
and the rows this relay publishes for the dead process duplicate some of it,
harmlessly. The outbox's statements are in `store/outbox.py`; this module
publishes what they hand over.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Sequence

import structlog

from services.engine.store.db import DATABASE_ERRORS
from services.engine.store.driver import Pool
from services.engine.store.outbox import OutboxRows
from shared.bus import Bus
from shared.errors import BusError, StoreUnavailable

log = structlog.get_logger(__name__)

# Whatever a broker or database outage raises here; the rows stay for the relay.
_UNAVAILABLE = (BusError, StoreUnavailable, *DATABASE_ERRORS)


#: How many times `stale_after` a live engine's rows wait before another engine's relay
#: takes them: that engine's own relay would have published them long before.
LIVE_WRITER_GRACE = 12


class Outbox:
    def __init__(
        self, *, pool: Pool, bus: Bus, stale_after: float = 5.0, engine_id: uuid.UUID | None = None
    ) -> None:
        """`engine_id`: the engine whose rows this relay publishes as its own (None: a
        relay of no engine, which takes only the rows of dead engines and stale rows)."""
        self._rows = OutboxRows(pool)
        self._bus = bus
        self._stale_after = stale_after
        self._engine_id = engine_id
        self._publishing: set[int] = set()  # ids the fast path is publishing now

    async def publish(self, ids: Sequence[int], messages: Sequence[tuple[str, str]]) -> None:
        """Fast path, right after commit. Failures are left to the relay."""
        if not ids:
            return
        self._publishing.update(ids)
        try:
            await self._send(messages)
            await self._rows.delete(ids)
        except _UNAVAILABLE as exc:
            log.warning("outbox_fast_path_failed", error=str(exc), count=len(ids))
        finally:
            self._publishing.difference_update(ids)

    async def _send(self, messages: Sequence[tuple[str, str]]) -> None:
        """Publish each (queue, JSON text) of `messages` together: one confirm wait for all."""
        await self._bus.publish_raw_batch([(queue, body.encode()) for queue, body in messages])

    async def relay_once(self, *, limit: int = 500) -> int:
        """Publish the rows of engines that died (their lease is free) and rows older
        than `stale_after` of this engine (a fast path that failed) or of none (a
        writer without a lease); another live engine's only once `LIVE_WRITER_GRACE`
        times older."""
        async with self._rows.orphans(
            stale_after=self._stale_after,
            limit=limit,
            writer=self._engine_id,
            publishing=sorted(self._publishing),
            live_after=self._stale_after * LIVE_WRITER_GRACE,
        ) as batch:
            if not batch.rows:
                return 0
            await self._send([(r.queue, json.dumps(r.body, separators=(",", ":"))) for r in batch.rows])
            await batch.published()
        log.info("outbox_relayed", count=len(batch.rows))
        return len(batch.rows)

    async def relay_forever(self, *, every: float = 1.0) -> None:
        while True:
            try:
                while await self.relay_once() > 0:
                    pass
            except _UNAVAILABLE as exc:
                log.warning("outbox_relay_failed", error=str(exc))
            await asyncio.sleep(every)
