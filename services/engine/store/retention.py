"""Statements of event retention: which stacks got events lately, and purging the oldest.

Where it sits: `services.engine.retention` sweeps every few seconds, off the
check path: it reads the stacks that got events since its last sweep (a range
of the events' primary key, `RECENT` at a time), and for each keeps only its
newest events (an index scan of events_stack from the newest end).
"""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from services.engine.store.db import CONNECT_ERRORS
from shared.errors import StoreUnavailable

#: Events read per sweep to find the stacks that got new ones.
RECENT = 10_000


class EventPurge:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def touched_since(self, after_seq: int) -> tuple[list[uuid.UUID], int]:
        """The stacks with events after `after_seq` (among the next `RECENT` events), and
        the last event sequence number read (`after_seq` when there is none)."""
        rows = await self._fetch(
            """SELECT stack_id, max(event_seq) AS last FROM (
                   SELECT stack_id, event_seq FROM events WHERE event_seq > $1
                   ORDER BY event_seq LIMIT $2) recent
               GROUP BY stack_id""",
            after_seq,
            RECENT,
        )
        last = max((r["last"] for r in rows), default=after_seq)
        return [r["stack_id"] for r in rows], last

    async def keep_newest(self, stack_id: uuid.UUID, keep: int) -> int:
        """Delete the stack's events but the newest `keep`; how many were deleted."""
        status = await self._execute(
            """DELETE FROM events WHERE stack_id = $1 AND event_seq <= (
                   SELECT event_seq FROM events WHERE stack_id = $1
                   ORDER BY event_seq DESC OFFSET $2 LIMIT 1)""",
            stack_id,
            keep,
        )
        return int(status.split()[-1])

    async def _fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        try:
            return list(await self._pool.fetch(sql, *args))
        except CONNECT_ERRORS as exc:
            raise StoreUnavailable(f"database unavailable: {exc}") from exc

    async def _execute(self, sql: str, *args: Any) -> str:
        try:
            return str(await self._pool.execute(sql, *args))
        except CONNECT_ERRORS as exc:
            raise StoreUnavailable(f"database unavailable: {exc}") from exc
