"""Row writes a batch holds back and sends together: one statement for many compare-and-swaps.

Where it sits: while a batch's rows are served from `prefetch.Prefetched`,
`ResourceStatements.update_resource` of a row this transaction locked (read
`FOR UPDATE` by `Tx.prefetch`, so no one else can change it) does not run its
own UPDATE: the change waits here, and `flush` writes every waiting change in
one `UPDATE ... FROM jsonb_populate_recordset(...)` per set of columns, still a
compare-and-swap on each row's version (a row count short of the changes is a
`ConflictError`: only a bug could cause it, and it fails the transaction).
`delete_resource` of such a row waits the same way, and the deletes go in one
`DELETE` after the changes.

Nothing reads a row whose change waits: every statement that names the
`resources` table flushes first (`prefetch.Watched`, and the statements of
`Tx` that bypass it), as do savepoints (entering, and leaving normally) and
the commit (`Store.transaction`). A second change to a row whose first still
waits flushes first, so one statement never writes one row twice.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from services.engine.core.row_change import ResourceChange
from shared.errors import ConflictError

#: A statement that reads or writes the resources table.
TOUCHES_RESOURCES = re.compile(r"\bresources\b", re.I)


@dataclass
class HeldWrites:
    """The changes waiting, by the columns they set: (resource id, version read, values)."""

    locked: dict[int, int] = field(default_factory=dict)  # row id -> its version now, rows this tx locked
    waiting: dict[tuple[str, ...], list[tuple[int, int, list[Any]]]] = field(default_factory=dict)
    rows: set[int] = field(default_factory=set)  # ids with a change waiting
    deleting: dict[int, int] = field(default_factory=dict)  # row id -> version: deletes waiting

    def hold(self, resource_id: int, version: int, change: ResourceChange) -> bool:
        """Keep `change` to the row if it can wait (a row this transaction locked, read at
        its current version, with no change of it waiting yet); True if kept."""
        if self.locked.get(resource_id) != version or resource_id in self.rows:
            return False
        written = change.written()
        values = [_json_value(v) for v in written.values()]
        self.waiting.setdefault(tuple(written), []).append((resource_id, version, values))
        self.rows.add(resource_id)
        self.locked[resource_id] = version + 1
        return True

    def hold_delete(self, resource_id: int, version: int) -> bool:
        """Keep the delete of the row if it can wait (as `hold`: a row this transaction
        locked, read at its current version, with no change of it waiting); True if kept.
        The deletes are written after the changes of other rows (`flush`)."""
        if self.locked.get(resource_id) != version or resource_id in self.rows:
            return False
        self.deleting[resource_id] = version
        del self.locked[resource_id]
        return True

    def wrote(self, resource_id: int, version: int) -> None:
        """A change to a locked row was written at once (compare-and-swap from `version`)."""
        if resource_id in self.locked:
            self.locked[resource_id] = version + 1

    def forget(self) -> None:
        """Drop what waits and what is known of locks (a savepoint undone)."""
        self.locked.clear()
        self.waiting.clear()
        self.rows.clear()
        self.deleting.clear()

    async def flush(self, fetch: Callable[..., Awaitable[list[Any]]]) -> int:
        """Write every waiting change (one statement per set of columns), then every
        waiting delete (one statement); returns how many."""
        count = await self._flush_changes(fetch)
        if not self.deleting:
            return count
        deleting, self.deleting = self.deleting, {}
        rows = await fetch(
            """DELETE FROM resources r USING unnest($1::bigint[], $2::integer[]) AS d(id, version)
               WHERE r.resource_id = d.id AND r.version = d.version RETURNING r.resource_id""",
            list(deleting),
            list(deleting.values()),
        )
        if len(rows) != len(deleting):
            raise ConflictError(f"{len(deleting) - len(rows)} held row deletes found their rows changed")
        return count + len(rows)

    async def _flush_changes(self, fetch: Callable[..., Awaitable[list[Any]]]) -> int:
        if not self.rows:
            return 0
        waiting, self.waiting = self.waiting, {}
        count = len(self.rows)
        self.rows = set()
        written = 0
        for columns, changes in waiting.items():
            records = [
                {"resource_id": rid, "version": version, **dict(zip(columns, values, strict=True))}
                for rid, version, values in changes
            ]
            ids = [rid for rid, _, _ in changes]
            rows = await fetch(_statement(columns), records, ids)  # the jsonb codec encodes records
            written += len(rows)
        if written != count:
            raise ConflictError(f"{count - written} held row writes found their rows changed")
        return count


def _statement(columns: tuple[str, ...]) -> str:
    """The UPDATE of many rows setting `columns`: each record is read as a row of the
    table (`jsonb_populate_recordset`), so every value takes its column's type; the
    ids ($2) make the rows found by the primary key (the records alone would have the
    planner scan the whole table: it cannot see inside them)."""
    sql = _STATEMENTS.get(columns)
    if sql is None:
        sets = "".join(f"{c} = v.{c}, " for c in columns)
        sql = f"""UPDATE resources r SET {sets}version = r.version + 1, updated_at = now()
                  FROM jsonb_populate_recordset(NULL::resources, $1::jsonb) AS v
                  WHERE r.resource_id = ANY($2::bigint[])
                    AND r.resource_id = v.resource_id AND r.version = v.version
                  RETURNING r.resource_id"""
        _STATEMENTS[columns] = sql
    return sql


_STATEMENTS: dict[tuple[str, ...], str] = {}


def _json_value(value: Any) -> Any:
    """A column's value as JSON that `jsonb_populate_recordset` reads back as the column's type."""
    if isinstance(value, frozenset | set):
        return sorted(value)
    if isinstance(value, Enum):  # Action, Status
        return value.value
    if isinstance(value, uuid.UUID):
        return str(value)
    return value
