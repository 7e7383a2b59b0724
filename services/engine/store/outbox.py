"""Statements of the transactional outbox after commit: published rows deleted, orphans relayed.

Where it sits: a handler's transaction adds the messages its effects cause
(`Tx.add_outbox`, store/inbox_outbox.py), each row naming the engine whose
lease covers it (`store/lease.py`). After commit `services.engine.outbox`
publishes them and deletes them (`OutboxRows.delete`); its relay takes the
rows of engines whose lease is free, and rows older than a bound that are its
own (but not those its fast path is publishing) or have no writer
(`OutboxRows.orphans`), in a transaction that holds them locked while they are
published, so two relays never take the same rows.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from services.engine.store.driver import Conn, Pool, given_back_clean
from services.engine.store.lease import LEASE_CLASS, LEASE_KEY_SQL

# The lease key of the engine that wrote an outbox row.
_WRITER_KEY = LEASE_KEY_SQL.format(column="engine_id")


@dataclass(frozen=True)
class OutboxRow:
    outbox_id: int
    queue: str
    body: Mapping[str, Any]


class OrphanBatch:
    """Rows the relay took, locked until its transaction ends."""

    def __init__(self, conn: Conn, rows: list[OutboxRow]) -> None:
        self._conn = conn
        self.rows = rows

    async def published(self) -> None:
        """The rows reached the bus: delete them, as the transaction commits."""
        await self._conn.execute(
            "DELETE FROM outbox WHERE outbox_id = ANY($1::bigint[])", [r.outbox_id for r in self.rows]
        )


class OutboxRows:
    """The outbox's statements outside a handler's transaction, on the pool."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def delete(self, ids: Sequence[int]) -> None:
        """Delete the rows `ids`, published on the fast path."""
        async with self._pool.acquire() as conn:
            await conn.execute("DELETE FROM outbox WHERE outbox_id = ANY($1::bigint[])", list(ids))
            given_back_clean(conn)  # one statement, committed alone: nothing for the pool to reset

    @contextlib.asynccontextmanager
    async def orphans(
        self,
        *,
        stale_after: float,
        limit: int,
        writer: uuid.UUID | None = None,
        publishing: Sequence[int] = (),
        live_after: float | None = None,
    ) -> AsyncIterator[OrphanBatch]:
        """Up to `limit` rows, oldest first, skipping rows another relay holds:
        - of engines that died (their lease is free: taking it for this transaction
          succeeds), at once;
        - older than `stale_after` seconds, of `writer` (this relay's engine; not the
          ids its fast path is `publishing`) or of no engine;
        - older than `live_after` seconds (default `stale_after`), of any engine.
        Locked until the block ends (an error in it rolls back, leaving the rows to be
        taken again)."""
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(
                f"""WITH writers AS (SELECT DISTINCT engine_id FROM outbox WHERE engine_id IS NOT NULL),
                        dead AS (SELECT engine_id FROM writers
                                 WHERE pg_try_advisory_xact_lock($3, {_WRITER_KEY}))
                   SELECT outbox_id, queue, body FROM outbox
                   WHERE engine_id IN (SELECT engine_id FROM dead)
                      OR (created_at < now() - make_interval(secs => $1)
                          AND (engine_id IS NULL OR engine_id = $4)
                          AND outbox_id NOT IN (SELECT unnest($5::bigint[])))
                      OR created_at < now() - make_interval(secs => $6)
                   ORDER BY outbox_id LIMIT $2 FOR UPDATE SKIP LOCKED""",
                stale_after,
                limit,
                LEASE_CLASS,
                writer,
                list(publishing),
                stale_after if live_after is None else live_after,
            )
            yield OrphanBatch(conn, [OutboxRow(r["outbox_id"], r["queue"], r["body"]) for r in rows])
