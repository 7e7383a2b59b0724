"""Statements of stack snapshots (mixed into `Tx`).

Where it sits: `services.engine.snapshots` writes a snapshot in the
transaction that starts its SNAPSHOT action, records what each resource's own
snapshot kept as that resource's job ends (`services.engine.convergence.results`),
and completes it in the transaction that ends the action; the API reads them back
through the same shell. Every statement names the stack, so a snapshot is
found only under its own stack.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import asyncpg

from services.engine.core.model import StackId

if TYPE_CHECKING:
    from services.engine.store.driver import Conn


@dataclass(frozen=True)
class SnapshotRecord:
    snapshot_id: uuid.UUID
    stack_id: uuid.UUID
    name: str | None
    status: str
    status_reason: str
    data: Mapping[str, Any]
    created_at: datetime


def _snapshot(r: asyncpg.Record) -> SnapshotRecord:
    return SnapshotRecord(**dict(r))


_COLUMNS = "snapshot_id, stack_id, name, status, status_reason, data, created_at"


class SnapshotStatements:
    _c: Conn

    async def insert_snapshot(
        self, snapshot_id: uuid.UUID, stack_id: StackId, name: str | None, data: Mapping[str, Any]
    ) -> None:
        await self._c.execute(
            """INSERT INTO snapshots (snapshot_id, stack_id, name, status, status_reason, data)
               VALUES ($1, $2, $3, 'IN_PROGRESS', 'Stack SNAPSHOT started', $4)""",
            snapshot_id,
            stack_id,
            name,
            dict(data),
        )

    async def snapshot(self, stack_id: StackId, snapshot_id: uuid.UUID) -> SnapshotRecord | None:
        r = await self._c.fetchrow(
            f"SELECT {_COLUMNS} FROM snapshots WHERE stack_id = $1 AND snapshot_id = $2",
            stack_id,
            snapshot_id,
        )
        return _snapshot(r) if r is not None else None

    async def snapshots(self, stack_id: StackId) -> list[SnapshotRecord]:
        rows = await self._c.fetch(
            f"SELECT {_COLUMNS} FROM snapshots WHERE stack_id = $1 ORDER BY created_at, snapshot_id", stack_id
        )
        return [_snapshot(r) for r in rows]

    async def count_snapshots(self, stack_id: StackId) -> int:
        count: int = await self._c.fetchval("SELECT count(*) FROM snapshots WHERE stack_id = $1", stack_id)
        return count

    async def delete_snapshot(self, stack_id: StackId, snapshot_id: uuid.UUID) -> bool:
        r = await self._c.fetchval(
            "DELETE FROM snapshots WHERE stack_id = $1 AND snapshot_id = $2 RETURNING 1",
            stack_id,
            snapshot_id,
        )
        return r is not None

    async def keep_resource_snapshot(
        self, snapshot_id: uuid.UUID, name: str, data: Mapping[str, Any]
    ) -> None:
        """What one resource's own snapshot kept, while its snapshot is in progress."""
        await self._c.execute(
            """INSERT INTO snapshot_resources (snapshot_id, name, data)
               SELECT $1, $2, $3 WHERE EXISTS (
                   SELECT 1 FROM snapshots WHERE snapshot_id = $1 AND status = 'IN_PROGRESS')
               ON CONFLICT (snapshot_id, name) DO UPDATE SET data = excluded.data""",
            snapshot_id,
            name,
            dict(data),
        )

    async def resource_snapshots(self, snapshot_id: uuid.UUID) -> dict[str, dict[str, Any]]:
        rows = await self._c.fetch(
            "SELECT name, data FROM snapshot_resources WHERE snapshot_id = $1", snapshot_id
        )
        return {r["name"]: r["data"] for r in rows}

    async def in_progress_snapshot(self, snapshot_id: uuid.UUID) -> SnapshotRecord | None:
        r = await self._c.fetchrow(
            f"SELECT {_COLUMNS} FROM snapshots WHERE snapshot_id = $1 AND status = 'IN_PROGRESS' FOR UPDATE",
            snapshot_id,
        )
        return _snapshot(r) if r is not None else None

    async def end_snapshot(
        self, snapshot_id: uuid.UUID, status: str, reason: str, data: Mapping[str, Any]
    ) -> None:
        await self._c.execute(
            "UPDATE snapshots SET status = $2, status_reason = $3, data = $4 WHERE snapshot_id = $1",
            snapshot_id,
            status,
            reason,
            dict(data),
        )

    async def resources_metadata(self, stack_id: StackId) -> dict[int, dict[str, Any] | None]:
        """Each current row's resolved metadata, by resource id."""
        rows = await self._c.fetch(
            "SELECT resource_id, metadata FROM resources WHERE stack_id = $1 AND replaced_by IS NULL",
            stack_id,
        )
        return {r["resource_id"]: r["metadata"] for r in rows}
