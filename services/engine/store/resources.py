"""Statements of resource rows (mixed into `Tx`): reading, claiming and changing them.

Where it sits: checks, job results, operations, signals and observation read
a stack's rows and change one with a compare-and-swap on its `version`
(`update_resource` writes the fields a `core.row_change.ResourceChange` sets,
`update_statement` is its SQL; `delete_resource`): a write from a stale read
fails and the caller decides again. An operation claims (locks, in resource id order,
and bumps) every row of its stack before it starts a traversal
(`claim_resources`), so decisions taken from earlier reads cannot commit
after it; an operation that timed out gives up its jobs in flight
(`disown_jobs`). A batch's prefetched rows (`store/prefetch.py`) answer
`resource` until the row is written here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from services.engine.core.model import (
    Action,
    Reference,
    ResourceId,
    ResourceRow,
    RowLinks,
    StackId,
    Status,
    TemplateId,
    TraversalId,
)
from services.engine.core.row_change import ResourceChange
from services.engine.store.advisory import uuid_key
from services.engine.store.driver import Conn, Record
from services.engine.store.prefetch import Prefetched
from services.engine.store.row_writes import HeldWrites
from services.engine.store.rows import (
    LINK_COLUMNS,
    REFERENCE_COLUMNS,
    RESOURCE_COLUMNS,
    reference,
    resource_row,
    row_links,
)

#: The current rows (not replaced) of stack $1 named in $2.
_CURRENT_NAMED = "WHERE stack_id = $1 AND name = ANY($2::text[]) AND replaced_by IS NULL"

#: The advisory lock class of an operation's claim of a stack's rows (`announce_claim`).
CLAIM_CLASS = 0x436E7643


class ResourceStatements:
    _c: Conn  # the transaction's connection (`Tx`; `Watched` while prefetched rows are served)
    _raw: Conn  # the connection itself: writes that forget exactly their own row
    _reads: Prefetched | None
    _held: HeldWrites | None  # row writes held back while a batch's rows are served

    async def flush_writes(self) -> None: ...  # `Tx`: the held row writes, written now

    async def resources(self, stack_id: StackId) -> list[ResourceRow]:
        rows = await self._c.fetch(
            f"SELECT {RESOURCE_COLUMNS} FROM resources WHERE stack_id = $1 ORDER BY resource_id", stack_id
        )
        return [resource_row(r) for r in rows]

    async def current_ids(self, stack_id: StackId) -> dict[str, ResourceId]:
        """The ids of the stack's current rows (not replaced) by name, nothing locked."""
        rows = await self._c.fetch(
            """SELECT name, resource_id FROM resources WHERE stack_id = $1 AND replaced_by IS NULL
               ORDER BY resource_id""",
            stack_id,
        )
        return {r["name"]: ResourceId(r["resource_id"]) for r in rows}

    async def claim_resources(self, stack_id: StackId) -> list[ResourceRow]:
        """Lock every row of the stack (in id order, so concurrent claims cannot
        deadlock) and bump its version, returning the rows as they now are.

        A new traversal starts from these rows; any decision taken from an
        earlier read of them fails its compare-and-swap and is made again.
        """
        rows = await self._claim(stack_id, RESOURCE_COLUMNS)
        return sorted((resource_row(r) for r in rows), key=lambda row: row.resource_id)

    async def claim_links(self, stack_id: StackId) -> list[RowLinks]:
        """`claim_resources`, returning only what a traversal's graph reads of each row
        (an update's start: the rest of 10k rows was a third of the claim's time)."""
        rows = await self._claim(stack_id, LINK_COLUMNS)
        return sorted((row_links(r) for r in rows), key=lambda row: row.resource_id)

    async def _claim(self, stack_id: StackId, columns: str) -> list[Record]:
        return await self._c.fetch(
            f"""WITH claimed AS (
                    SELECT resource_id FROM resources WHERE stack_id = $1 ORDER BY resource_id FOR UPDATE
                )
                UPDATE resources r SET version = r.version + 1 FROM claimed
                WHERE r.resource_id = claimed.resource_id
                RETURNING {", ".join(f"r.{c.strip()}" for c in columns.split(","))}""",
            stack_id,
        )

    async def announce_claim(self, stack_id: StackId) -> None:
        """Say that this transaction, an operation, is about to claim the stack's rows
        (`claim_resources`): until it ends, `claims_under_way` names the stack, so a
        batch does not take rows of it it could leave for the queue (`convergence.follow_on`)
        and make the claim wait. Operations announce before they lock anything, so two of
        them announce in turn and take the rows in turn."""
        await self._c.execute("SELECT pg_advisory_xact_lock($1, $2)", CLAIM_CLASS, uuid_key(stack_id))

    async def claims_under_way(self, stack_ids: Iterable[StackId]) -> set[StackId]:
        """Which of these stacks an operation is claiming (or waiting to) right now
        (`announce_claim`). Tested, not held: the answer may be stale the next moment."""
        ids = sorted(set(stack_ids))
        rows = await self._c.fetch(
            """SELECT s FROM unnest($2::uuid[], $3::int[]) AS k(s, key)
               WHERE CASE WHEN pg_try_advisory_lock_shared($1, k.key)
                          THEN NOT pg_advisory_unlock_shared($1, k.key) ELSE true END""",
            CLAIM_CLASS,
            ids,
            [uuid_key(i) for i in ids],
        )
        return {StackId(r["s"]) for r in rows}

    async def lock_resources(self, stack_id: StackId) -> None:
        """Lock every row of the stack (in id order), changing nothing: to take the locks a
        later step needs before others, in the order the rest of the engine takes them."""
        await self._c.execute(
            "SELECT resource_id FROM resources WHERE stack_id = $1 ORDER BY resource_id FOR UPDATE", stack_id
        )

    async def resource(self, resource_id: int, *, lock: bool = False) -> ResourceRow | None:
        if not lock and self._reads is not None and resource_id in self._reads.resources:
            return self._reads.resources[resource_id]
        sql = f"SELECT {RESOURCE_COLUMNS} FROM resources WHERE resource_id = $1"
        r = await self._c.fetchrow(sql + (" FOR UPDATE" if lock else ""), resource_id)
        return resource_row(r) if r is not None else None

    async def resources_by_id(self, resource_ids: Iterable[int]) -> dict[int, ResourceRow]:
        """The rows of `resource_ids` there are, as they are in this transaction (those of
        a batch's rows read ahead and not written since from there, the rest in one statement)."""
        wanted = sorted(set(resource_ids))
        known: dict[int, ResourceRow | None] = self._reads.resources if self._reads is not None else {}
        found = {i: known[i] for i in wanted if i in known}
        missing = [i for i in wanted if i not in known]
        if missing:
            rows = await self._c.fetch(
                f"SELECT {RESOURCE_COLUMNS} FROM resources WHERE resource_id = ANY($1::bigint[])", missing
            )
            found.update((r["resource_id"], resource_row(r)) for r in rows)
        return {i: row for i, row in found.items() if row is not None}

    async def read_references(self, wanted: Mapping[StackId, Iterable[str]]) -> None:
        """Read now, in one statement, the references `references` will be asked for (by
        stack, the names), while a batch's rows are served (`prefetch`)."""
        if self._reads is None:
            return
        keys = sorted({(stack_id, name) for stack_id, names in wanted.items() for name in names})
        rows = await self._c.fetch(
            f"""SELECT {REFERENCE_COLUMNS} FROM resources
                WHERE (stack_id, name) IN (SELECT * FROM unnest($1::uuid[], $2::text[]))
                  AND replaced_by IS NULL""",
            [k[0] for k in keys],
            [k[1] for k in keys],
        )
        self._reads.add_references(keys, [reference(r) for r in rows])

    async def references(self, stack_id: StackId, names: Iterable[str]) -> dict[str, Reference]:
        """The reference of each named resource's current row (not replaced): from those
        read ahead (`read_references`) while they hold, else in one statement."""
        wanted = list(names)
        if self._reads is not None and all((stack_id, n) in self._reads.references for n in wanted):
            known = ((n, self._reads.references[(stack_id, n)]) for n in wanted)
            return {n: reference for n, reference in known if reference is not None}
        sql = f"SELECT {REFERENCE_COLUMNS} FROM resources {_CURRENT_NAMED}"
        rows = await self._c.fetch(sql, stack_id, wanted)
        return {r["name"]: reference(r) for r in rows}

    async def current_resources(self, stack_id: StackId, names: Iterable[str]) -> dict[str, ResourceRow]:
        """The current row (not replaced) of each named resource."""
        sql = f"SELECT {RESOURCE_COLUMNS} FROM resources {_CURRENT_NAMED}"
        rows = await self._c.fetch(sql, stack_id, list(names))
        return {r["name"]: resource_row(r) for r in rows}

    async def resource_by_physical_id(
        self, stack_id: StackId, physical_id: str, *, lock: bool = False
    ) -> ResourceRow | None:
        r = await self._c.fetchrow(
            f"""SELECT {RESOURCE_COLUMNS} FROM resources
                WHERE stack_id = $1 AND physical_id = $2 AND replaced_by IS NULL"""
            + (" FOR UPDATE" if lock else ""),
            stack_id,
            physical_id,
        )
        return resource_row(r) if r is not None else None

    async def waiting_conditions(
        self, stack_id: StackId, type_name: str, handle_ref: str
    ) -> list[ResourceRow]:
        """Rows of `type_name` whose job in flight waits on the handle `handle_ref`."""
        rows = await self._c.fetch(
            f"""SELECT {RESOURCE_COLUMNS} FROM resources
                WHERE stack_id = $1 AND type = $2 AND current_job IS NOT NULL
                  AND job_properties ->> 'handle' = $3""",
            stack_id,
            type_name,
            handle_ref,
        )
        return [resource_row(r) for r in rows]

    async def insert_resources(
        self,
        stack_id: StackId,
        entries: Sequence[tuple[str, str, TemplateId, str]],
        *,
        replaces: ResourceId | None = None,
    ) -> list[ResourceId]:
        """New INIT rows: (name, type, template_id, deletion_policy) each; ids in order."""
        if not entries:
            return []
        rows = await self._c.fetch(
            """INSERT INTO resources (stack_id, name, type, template_id, deletion_policy, replaces)
               SELECT $1, n, t, tid, dp, $6
               FROM unnest($2::text[], $3::text[], $4::uuid[], $5::text[]) WITH ORDINALITY
                    AS e(n, t, tid, dp, i)
               ORDER BY i RETURNING resource_id""",
            stack_id,
            [e[0] for e in entries],
            [e[1] for e in entries],
            [e[2] for e in entries],
            [e[3] for e in entries],
            replaces,
        )
        return [r["resource_id"] for r in rows]

    async def update_resource(self, row: ResourceRow, change: ResourceChange) -> bool:
        """Compare-and-swap on `version`: write the fields `change` sets; False if someone
        changed the row since it was read. A row this transaction locked, read at its
        version, has its write held back and sent with others (`row_writes`): True."""
        self._forget_resource(row.resource_id)
        if self._held is not None and self._held.hold(row.resource_id, row.version, change):
            return True
        await self.flush_writes()
        sql, values = update_statement(change)
        r = await self._raw.fetchval(sql, row.resource_id, row.version, *values)
        if r is not None and self._held is not None:
            self._held.wrote(row.resource_id, row.version)
        return r is not None

    def _forget_resource(self, resource_id: int) -> None:
        if self._reads is not None:
            self._reads.forget_resource(resource_id)

    async def delete_resource(self, row: ResourceRow) -> bool:
        """Compare-and-swap delete: False if the row changed since it was read. A row this
        transaction locked, read at its version, has its delete held back and sent with
        others (`row_writes`): True."""
        self._forget_resource(row.resource_id)
        if self._held is not None and self._held.hold_delete(row.resource_id, row.version):
            return True
        await self.flush_writes()
        if self._held is not None:
            self._held.locked.pop(row.resource_id, None)
        r = await self._raw.fetchval(
            "DELETE FROM resources WHERE resource_id = $1 AND version = $2 RETURNING 1",
            row.resource_id,
            row.version,
        )
        return r is not None

    async def disown_jobs(self, stack_id: StackId, traversal: TraversalId, reason: str) -> list[str]:
        """Stop waiting for the jobs `traversal` has in flight whose real resource is
        known: the rows become FAILED, keeping the properties a delete needs (a create's
        are its job's), so cleanup can delete them; late outcomes of those
        jobs are stale and ignored. Jobs that never reported a physical id are left to
        their own deadline, so no real resource goes unrecorded."""
        rows = await self._c.fetch(
            """UPDATE resources SET current_job = NULL, job_node = NULL, job_properties = NULL,
                   properties = COALESCE(properties, job_properties),
                   job_requires = NULL, job_template_id = NULL, observing_job = NULL,
                   status = 'FAILED', status_reason = $3,
                   version = version + 1, updated_at = now()
               WHERE stack_id = $1 AND traversal_id = $2 AND current_job IS NOT NULL
                 AND physical_id IS NOT NULL
               RETURNING name""",
            stack_id,
            traversal,
            reason,
        )
        return sorted(r["name"] for r in rows)

    async def in_progress_names(self, stack_id: StackId) -> list[str]:
        rows = await self._c.fetch(
            """SELECT DISTINCT name FROM resources
               WHERE stack_id = $1 AND status = 'IN_PROGRESS' ORDER BY name""",
            stack_id,
        )
        return [r["name"] for r in rows]

    async def failed_checks(self, stack_id: StackId, traversal: TraversalId) -> list[tuple[str, str]]:
        """(name, reason) of each resource that failed its check in the check `traversal`."""
        rows = await self._c.fetch(
            """SELECT name, status_reason FROM resources
               WHERE stack_id = $1 AND traversal_id = $2 AND action = 'CHECK' AND status = 'FAILED'
                 AND replaced_by IS NULL ORDER BY resource_id""",
            stack_id,
            traversal,
        )
        return [(r["name"], r["status_reason"]) for r in rows]


def update_statement(change: ResourceChange) -> tuple[str, list[Any]]:
    """The compare-and-swap UPDATE writing `change` ($1 the row's id, $2 the version it
    was read at) and the values of the columns it sets ($3 on)."""
    written = change.written()
    columns = tuple(written)
    sql = _UPDATES.get(columns)
    if sql is None:
        assignments = "".join(f"{c} = ${i}, " for i, c in enumerate(columns, 3))
        sql = f"""UPDATE resources SET {assignments}version = version + 1, updated_at = now()
                WHERE resource_id = $1 AND version = $2 RETURNING 1"""
        _UPDATES[columns] = sql
    return sql, [_db_value(v) for v in written.values()]


#: The statement of each set of columns written (a few dozen in all).
_UPDATES: dict[tuple[str, ...], str] = {}


def _db_value(value: Any) -> Any:
    if isinstance(value, frozenset | set):
        return sorted(value)
    if isinstance(value, Action | Status):
        return value.value
    return value
