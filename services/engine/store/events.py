"""Statements of stack events (mixed into `Tx`): the history the events API lists.

Where it sits: `services.engine.effects` collects a handler's events as
`EventRecord`s and adds them in the handler's transaction (`add_events`),
beside its outbox rows, so an event is recorded exactly when its change
commits. The API reads them (`store/queries.py`); `store/retention.py` purges
the oldest beyond a stack's budget.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from services.engine.core.model import StackId
from services.engine.store.driver import Conn


@dataclass(frozen=True)
class EventRecord:
    stack_id: StackId
    resource_name: str
    physical_resource_id: str | None
    resource_type: str
    action: str
    status: str
    reason: str


class EventStatements:
    _c: Conn  # the transaction's connection (`Tx`)

    async def add_events(self, events: Sequence[EventRecord]) -> None:
        if not events:
            return
        await self._c.executemany(
            """INSERT INTO events (event_id, stack_id, resource_name, physical_resource_id,
                                   resource_type, action, status, reason)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8)""",
            [
                (
                    uuid.uuid4(),
                    e.stack_id,
                    e.resource_name,
                    e.physical_resource_id,
                    e.resource_type,
                    e.action,
                    e.status,
                    e.reason,
                )
                for e in events
            ],
        )
