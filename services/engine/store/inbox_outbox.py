"""Statements of the inbox and the outbox (mixed into `Tx`): a message handled once, its effects sent.

Where it sits: a handler's transaction claims the id of the message it handles
(`claim_message`, or `claim_messages` for a batch) before it writes anything;
a redelivered message finds its id claimed and changes nothing, so delivery
may be at-least-once while every effect happens once. `Store.prune` drops ids
old enough that no redelivery can still come. The messages its effects cause
are written to the outbox in the same transaction (`add_outbox`), each row
naming the engine whose lease covers it; after commit `services.engine.outbox`
publishes them (its statements: `store/outbox.py`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from services.engine.store.driver import Conn


class InboxStatements:
    _c: Conn  # the transaction's connection (`Tx`)

    async def claim_message(self, message_id: str) -> bool:
        """Record that this message's effects are being committed; False if done before."""
        row = await self._c.fetchval(
            "INSERT INTO inbox (message_id) VALUES ($1) ON CONFLICT DO NOTHING RETURNING 1", message_id
        )
        return row is not None

    async def claim_messages(self, message_ids: Sequence[str]) -> set[str]:
        """`claim_message` for a batch, in one statement: the ids not done before.
        Claimed in sorted order, so two batches sharing ids never deadlock."""
        rows = await self._c.fetch(
            """INSERT INTO inbox (message_id) SELECT m FROM unnest($1::text[]) AS m ORDER BY m
               ON CONFLICT DO NOTHING RETURNING message_id""",
            sorted(set(message_ids)),
        )
        return {r["message_id"] for r in rows}


class OutboxStatements:
    _c: Conn  # the transaction's connection (`Tx`)
    _engine_id: uuid.UUID | None  # written on outbox rows (the engine's lease)

    async def add_outbox(self, messages: Sequence[tuple[str, str]]) -> list[int]:
        """Write each (queue, JSON text) of `messages`; the new rows' ids. A row's age
        (`created_at`, what the relay calls stale) counts from this statement, not from
        the transaction's start: the end of a long transaction is not stale at commit."""
        if not messages:
            return []
        rows = await self._c.fetch(
            """INSERT INTO outbox (queue, body, engine_id, created_at)
               SELECT q, b::jsonb, $3, clock_timestamp() FROM unnest($1::text[], $2::text[]) AS m(q, b)
               RETURNING outbox_id""",
            [q for q, _ in messages],
            [body for _, body in messages],
            self._engine_id,
        )
        return [r["outbox_id"] for r in rows]

    async def take_outbox(self, outbox_id: int) -> None:
        """Delete an outbox row whose message this transaction handles itself (it is then
        never sent; if a relay sent it first, its receiver finds the work done)."""
        await self._c.execute("DELETE FROM outbox WHERE outbox_id = $1", outbox_id)
