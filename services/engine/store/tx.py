"""The convergence engine's transaction (`Tx`): the statement families, composed.

The async shell opens a `Tx` per message (or operation, or batch), runs the
reads and writes a decision needs, and commits them together with the inbox
record and the outbox messages, so an effect and the messages it causes are
never separated. Rows come back as the frozen records of `core.model`.

Each family of statements is a mixin in a module of its own: `stacks.py`,
`templates.py`, `resources.py`, `graph.py` (a traversal's nodes), `events.py`,
`inbox_outbox.py`, and the features' own (`observing.py`, `tenancy.py`,
`recovery.py`, `parity.py`, `snapshots.py`, `software_configs.py`,
`software_deployments.py`). Here are what they share: the connection, the
rows a batch read up front (`prefetch`), the row writes it holds back to send
together (`row_writes.py`, written at the latest when the transaction
commits), savepoints (a follow-on round of checks, `convergence.follow_on`)
and the engine whose lease covers the outbox rows written.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from services.engine.core.model import Node, StackId, TraversalId, forward
from services.engine.store.driver import Conn
from services.engine.store.events import EventStatements
from services.engine.store.graph import OWN_OR_BASE_NODES, GraphStatements
from services.engine.store.inbox_outbox import InboxStatements, OutboxStatements
from services.engine.store.observing import ObservationStatements
from services.engine.store.parity import ParityStatements
from services.engine.store.prefetch import NodeState, Prefetched, Watched
from services.engine.store.recovery import RecoveryStatements
from services.engine.store.resources import ResourceStatements
from services.engine.store.row_writes import TOUCHES_RESOURCES, HeldWrites
from services.engine.store.rows import RESOURCE_COLUMNS, STACK_COLUMNS, resource_row, stack_row
from services.engine.store.snapshots import SnapshotStatements
from services.engine.store.software_configs import SoftwareConfigStatements
from services.engine.store.software_deployments import SoftwareDeploymentStatements
from services.engine.store.stacks import StackStatements
from services.engine.store.templates import TemplateRecord, TemplateStatements
from services.engine.store.tenancy import TenancyStatements
from shared.errors import ConflictError

# `TemplateRecord` lives in templates.py; services/engine/operations.py still imports it from here.
__all__ = ["TemplateRecord", "Tx"]

#: What undoes a savepoint as a `ConflictError`: another transaction was in the way.
_CONFLICTS = (
    asyncpg.exceptions.SerializationError,
    asyncpg.exceptions.DeadlockDetectedError,
    asyncpg.exceptions.LockNotAvailableError,
)


class Tx(
    InboxStatements,
    OutboxStatements,
    EventStatements,
    TemplateStatements,
    StackStatements,
    ResourceStatements,
    GraphStatements,
    ObservationStatements,
    TenancyStatements,
    RecoveryStatements,
    ParityStatements,
    SnapshotStatements,
    SoftwareConfigStatements,
    SoftwareDeploymentStatements,
):
    def __init__(self, conn: Conn, *, engine_id: uuid.UUID | None = None) -> None:
        self._c: Any = conn  # `Watched` while prefetched rows are served
        self._raw = conn
        self._reads: Prefetched | None = None
        self._held: HeldWrites | None = None  # row writes held back while rows are prefetched
        self._engine_id = engine_id  # written on outbox rows (the engine's lease)
        self._moved: set[StackId] = set()  # stacks whose traversal this transaction moved
        self._finishing: set[tuple[TraversalId, Node]] = set()  # nodes done here (`finishing`)
        self._savepoints = 0  # savepoints begun (their names)

    async def prefetch(
        self,
        *,
        resources: Iterable[int],
        stacks: Iterable[StackId],
        nodes: Iterable[tuple[TraversalId, Node]],
        current_forward: Iterable[int] = (),
        skip_locked: bool = False,
    ) -> set[int]:
        """Read these rows now, one statement per table (resources first, then the
        stacks named and those of the resources found); `resource`, `stack` and `node`
        answer from them until they are written. The resource rows are locked, in
        resource id order, as an operation claims its stack's rows (`claim_resources`):
        a batch and an operation, or two batches, never wait for each other in a cycle.
        `current_forward`: resource ids whose forward node in their stack's current
        traversal is read too (whether a job's result is still wanted: `results`).
        `skip_locked`: rows another transaction holds are not waited for, nor read.
        Returns the ids of the resource rows read (and locked)."""
        await self.flush_writes()
        reads = Prefetched()
        resource_ids = sorted(set(resources))
        rows = await self._raw.fetch(
            f"""SELECT {RESOURCE_COLUMNS} FROM resources WHERE resource_id = ANY($1::bigint[])
                ORDER BY resource_id FOR UPDATE{" SKIP LOCKED" if skip_locked else ""}""",
            resource_ids,
        )
        if not skip_locked:  # a row not read is not there (skipped: it may be)
            reads.resources = dict.fromkeys(resource_ids)
        reads.resources.update((r["resource_id"], resource_row(r)) for r in rows)
        if self._held is None:
            self._held = HeldWrites()
        self._held.locked.update((r["resource_id"], r["version"]) for r in rows)
        stack_ids = sorted(set(stacks) | {r.stack_id for r in reads.resources.values() if r is not None})
        rows = await self._raw.fetch(
            f"""SELECT {STACK_COLUMNS} FROM stacks
                WHERE stack_id = ANY($1::uuid[]) AND deleted_at IS NULL""",
            stack_ids,
        )
        reads.stacks = dict.fromkeys(stack_ids)
        reads.stacks.update((r["stack_id"], stack_row(r)) for r in rows)
        wanted = set(nodes)
        for resource_id in current_forward:
            row = reads.resources.get(resource_id)
            stack = reads.stacks.get(row.stack_id) if row is not None else None
            if stack is not None and stack.current_traversal is not None:
                wanted.add((stack.current_traversal, forward(resource_id)))
        keys = sorted(wanted)
        own_or_base = OWN_OR_BASE_NODES.format(
            t="k.t", own_node="AND own.node = k.n", base_node="AND b.node = k.n"
        )
        rows = await self._raw.fetch(  # a node carried over from a base: its row there (store/graph.py)
            f"""SELECT k.t AS traversal_id, k.n AS node, x.requires_count, x.done
               FROM unnest($1::uuid[], $2::bigint[]) AS k(t, n)
               CROSS JOIN LATERAL (SELECT * FROM ({own_or_base}) n ORDER BY rank LIMIT 1) x""",
            [k[0] for k in keys],
            [k[1] for k in keys],
        )
        reads.nodes = dict.fromkeys(keys)
        reads.nodes.update(
            ((r["traversal_id"], r["node"]), NodeState(r["requires_count"], r["done"])) for r in rows
        )
        self._reads = reads
        self._c = Watched(self._raw, reads, self._before_statement)
        return {r.resource_id for r in reads.resources.values() if r is not None}

    def forget_prefetched(self) -> None:
        """Read every row from the database again (after a savepoint's rollback: a row
        read after a write the rollback undid would be wrong), and hold back no write."""
        self._reads = None
        self._c = self._raw
        self._finishing.clear()  # what the rollback left done is read from the rows again
        if self._held is not None:
            self._held.forget()

    async def flush_writes(self) -> None:
        """Write the row writes held back (`row_writes`) now."""
        if self._held is not None:
            await self._held.flush(self._raw.fetch)

    async def _before_statement(self, sql: str) -> None:
        if TOUCHES_RESOURCES.search(sql):
            await self.flush_writes()

    @asynccontextmanager
    async def savepoint(self, *, lock_wait: float | None = None) -> AsyncIterator[None]:
        """A part of the transaction that an exception undoes alone (then raised; a
        deadlock, serialization failure or lock wait past `lock_wait` as a
        `ConflictError`). The rows read up front are forgotten when it is undone.
        `lock_wait`: from the savepoint on, for the rest of the transaction unless the
        part is undone, a statement that waits longer than that many seconds for a lock
        fails; set in the savepoint's own round trip. A part that succeeds is not
        released: its savepoint ends with the transaction, a round trip fewer."""
        await self.flush_writes()
        moved = set(self._moved)
        self._savepoints += 1
        name = f"converge_part_{self._savepoints}"
        begin = f"SAVEPOINT {name}"
        if lock_wait is not None:
            begin += f"; SET LOCAL lock_timeout = '{max(1, round(lock_wait * 1000))}ms'"
        await self._raw.execute(begin)  # no arguments: one simple query, both statements
        try:
            yield
            await self.flush_writes()
        except BaseException as exc:
            self.forget_prefetched()
            self._moved = moved
            if not isinstance(exc, Exception):  # cancelled: the whole transaction is abandoned
                raise
            await self._raw.execute(f"ROLLBACK TO SAVEPOINT {name}")
            if isinstance(exc, _CONFLICTS):
                raise ConflictError(f"concurrent update: {exc}") from exc
            raise
