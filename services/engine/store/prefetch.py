"""Rows a batch reads up front, one statement per table, served to its messages' handlers.

Where it sits: `Convergence.handle_batch` asks its `Tx` to `prefetch` the
resources, stacks and traversal nodes its node checks and job results name;
from then on `Tx.resource`, `Tx.stack` and `Tx.node` answer from `Prefetched`
instead of a round trip each, until the row is written in the transaction;
so does `Tx.references` for the resources its forward checks require (their
ids, types, physical ids and attributes, not whole rows), read ahead in one
statement (`Tx.read_references`).

What a prefetched row may miss is what a read at the handler's own moment
could see: its own transaction's writes (forgotten here the moment they
happen: the hot writes forget exactly their row, any other statement that
writes `stacks`, `resources` or `traversal_nodes` forgets that whole table)
and other transactions' commits since the batch began. The resource rows are
locked as they are read (in resource id order, as an operation claims its
stack's rows), so none of them changes under the batch; a stack or node read
may be as old as the batch's start, which is no more than a batch that started
a little later would have missed: an operation that preempts a traversal
claims (locks and bumps) every row of its stack before it moves the stack's
traversal, so it waits for the batch, or the batch for it. Resources are read
before stacks for that reason, as `convergence.checks` reads the stack again after the row.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from services.engine.core.model import Node, Reference, ResourceRow, StackId, StackRow, TraversalId

#: A statement that writes a table rows are prefetched from (which table: group 1).
_WRITES = re.compile(r"\b(?:update|delete\s+from|insert\s+into)\s+(stacks|resources|traversal_nodes)\b", re.I)


@dataclass(frozen=True)
class NodeState:
    requires_count: int
    done: bool


@dataclass
class Prefetched:
    """Rows read for a batch, by key; None: read, and not there."""

    stacks: dict[StackId, StackRow | None] = field(default_factory=dict)
    resources: dict[int, ResourceRow | None] = field(default_factory=dict)
    nodes: dict[tuple[TraversalId, Node], NodeState | None] = field(default_factory=dict)
    #: the reference of a stack's resource (its current row's) by name, None: read, none
    references: dict[tuple[StackId, str], Reference | None] = field(default_factory=dict)
    _reference_keys: dict[int, tuple[StackId, str]] = field(default_factory=dict)  # by row id

    def add_references(self, keys: list[tuple[StackId, str]], found: list[Reference]) -> None:
        """`keys` were read: these are their current rows' references (the others have none)."""
        self.references.update(dict.fromkeys(keys))
        for reference in found:
            key = (reference.stack_id, reference.name)
            self.references[key] = reference
            self._reference_keys[reference.resource_id] = key

    def written(self, sql: str) -> None:
        """Forget the table `sql` writes, if it writes one of these."""
        for table in {m.group(1).lower() for m in _WRITES.finditer(sql)}:
            if table == "stacks":
                self.stacks.clear()
            elif table == "resources":
                self.resources.clear()
                self.references.clear()
                self._reference_keys.clear()
            else:
                self.nodes.clear()

    def forget_resource(self, resource_id: int) -> None:
        """Forget one resource row (written in this transaction), also as a reference."""
        self.resources.pop(resource_id, None)
        key = self._reference_keys.pop(resource_id, None)
        if key is not None:
            self.references.pop(key, None)


class Watched:
    """A transaction's connection while `reads` are served: every statement through it
    that writes a prefetched table forgets that table's rows first, and `before` runs
    first with the statement (the row writes held back are flushed there:
    `row_writes`)."""

    def __init__(self, conn: Any, reads: Prefetched, before: Callable[[str], Awaitable[None]]) -> None:
        self._conn = conn
        self._reads = reads
        self._before = before

    async def _prepare(self, sql: str) -> None:
        await self._before(sql)
        self._reads.written(sql)

    async def execute(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        await self._prepare(sql)
        return await self._conn.execute(sql, *args, **kwargs)

    async def executemany(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        await self._prepare(sql)
        return await self._conn.executemany(sql, *args, **kwargs)

    async def fetch(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        await self._prepare(sql)
        return await self._conn.fetch(sql, *args, **kwargs)

    async def fetchrow(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        await self._prepare(sql)
        return await self._conn.fetchrow(sql, *args, **kwargs)

    async def fetchval(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        await self._prepare(sql)
        return await self._conn.fetchval(sql, *args, **kwargs)

    async def copy_records_to_table(self, table: str, **kwargs: Any) -> Any:
        await self._prepare(f"insert into {table}")
        return await self._conn.copy_records_to_table(table, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)
