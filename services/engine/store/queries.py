"""Read-side statements for the API: stacks, resources, events, templates.

Plain reads outside any convergence transaction; every query is scoped to a
project (or, for admins, all projects) so another project's stacks are
simply not found. Paging markers too: a marker is looked up only among the
stacks (or events) being listed, so another project's id behaves exactly as
an unknown one.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict

import asyncpg

from services.engine.store.templates import TemplateRecord

STACK_SORT_KEYS = {
    "stack_name": "name",
    "stack_status": "status",
    "creation_time": "created_at",
    "updated_time": "updated_at",
}


@dataclass(frozen=True)
class StackView:
    stack_id: uuid.UUID
    project_id: str
    name: str
    action: str
    status: str
    status_reason: str
    current_template_id: uuid.UUID | None
    previous_template_id: uuid.UUID | None
    disable_rollback: bool
    timeout_mins: int | None
    tags: tuple[str, ...]
    created_at: datetime
    updated_at: datetime | None
    deleted_at: datetime | None
    owner_stack_id: uuid.UUID | None = None  # the parent, for a nested stack


@dataclass(frozen=True)
class StackFilter:
    project_id: str | None  # None: every project (admin, global_tenant)
    names: Sequence[str] = ()
    statuses: Sequence[str] = ()
    ids: Sequence[uuid.UUID] = ()
    show_deleted: bool = False
    sort_key: str = "creation_time"
    sort_dir: str = "desc"
    limit: int = 1000
    marker: uuid.UUID | None = None
    show_nested: bool = False  # nested stacks are listed only when asked for
    tags: Sequence[str] = ()  # has every one of these tags
    tags_any: Sequence[str] = ()  # has at least one of them
    not_tags: Sequence[str] = ()  # lacks at least one of them
    not_tags_any: Sequence[str] = ()  # has none of them


#: Event sort keys (Heat's names) -> the column; event_time follows the events' order.
EVENT_SORT_KEYS = {"event_time": "event_seq", "resource_type": "coalesce(resource_type, '')"}


@dataclass(frozen=True)
class EventFilter:
    """Which events to list, and in what order (Heat's event filters and sort keys)."""

    names: Sequence[str] = ()
    actions: Sequence[str] = ()
    statuses: Sequence[str] = ()  # "COMPLETE", or "CREATE_COMPLETE" (action and status)
    types: Sequence[str] = ()
    sort_keys: Sequence[str] = ()  # of EVENT_SORT_KEYS; unknown ones are left out, as Heat does
    sort_dir: str = "asc"


@dataclass(frozen=True)
class NestedStack:
    """A stack of a tree, as `stack_tree` finds it."""

    stack_id: uuid.UUID
    name: str
    depth: int  # 0: the root
    parent_resource: str | None  # the parent's resource owning it (None: the root)


_STACK = """stack_id, project_id, name, action, status, status_reason, current_template_id,
    previous_template_id, disable_rollback, timeout_mins, tags, created_at, updated_at, deleted_at,
    owner_stack_id"""


#: What the resource views show of a row (no properties, attributes or job columns).
_RESOURCE_VIEW = """r.resource_id, r.name, r.type, r.physical_id, r.action, r.status, r.status_reason,
    r.created_at, r.updated_at"""

#: Where a page of resources ends: (name, resource_id) of its last row.
ResourceKey = tuple[str, int]


@dataclass(frozen=True)
class IndexedReads:
    """A connection in a transaction of `Queries.by_index`."""

    connection: Any  # an asyncpg connection (or what a test records it through)


class ResourceFilters(TypedDict):
    """What a resource list keeps (`Queries.resources`): rows with any of these names,
    types or statuses; an empty list keeps all."""

    names: list[str]
    types: list[str]
    statuses: list[str]


#: Rows per round trip when a whole stack's reverse dependencies are read.
REVERSE_CHUNK = 2000
_REQUIRED_BY = """SELECT x.req, array_agg(x.name) AS names
    FROM (SELECT d.name, unnest(d.requires) AS req FROM resources d
          WHERE d.stack_id = $1 AND d.replaced_by IS NULL) x
    GROUP BY x.req"""


def _edges(ids: str) -> str:
    """CTEs `d` and `edges`: the current rows of the stack ($1) requiring any of `ids` (an
    expression of type bigint[]), found through resources_requires (resource ids are
    unique across stacks, so the stack is checked on the rows found); `edges` has one
    row per required id: (req, names of the rows requiring it, sorted)."""
    return f"""d AS MATERIALIZED (
        SELECT name, requires, stack_id, replaced_by FROM resources WHERE requires && {ids}),
    edges AS MATERIALIZED (
        SELECT x.req, array_agg(x.name ORDER BY x.name) AS names
        FROM (SELECT d.name, unnest(d.requires) AS req FROM d
              WHERE d.stack_id = $1 AND d.replaced_by IS NULL) x
        WHERE x.req = ANY({ids})
        GROUP BY x.req)"""


#: The rows requiring any of the resource ids $2.
_REQUIRED_BY_IDS = f"WITH {_edges('$2::bigint[]')} SELECT req, names FROM edges"


def _with_required_by(page: str) -> str:
    """`page` (a statement whose rows are ordered by name and id) with each row's
    `required_by`: the lookup of _REQUIRED_BY_IDS for the page's ids, in the same statement."""
    return f"""WITH page AS MATERIALIZED ({page}),
    ids AS (SELECT coalesce(array_agg(resource_id), '{{}}') AS ids FROM page),
    {_edges("(SELECT ids FROM ids)::bigint[]")}
    SELECT page.*, coalesce(edges.names, '{{}}') AS required_by
    FROM page LEFT JOIN edges ON edges.req = page.resource_id
    ORDER BY page.name, page.resource_id"""


#: Planner settings for a read transaction that must go through its indexes. Until
#: autovacuum has gathered statistics that know a large young stack (a new deployment's
#: table was never analyzed; a stack created since the last analysis is estimated like
#: the others), PostgreSQL believes it has a handful of rows, and would rather read all
#: of them and sort them than walk an index: 10-30 ms a page at 10k rows, growing with
#: the stack. A page walks resources_page in its own order, which then costs least.
#: The rows requiring some ids can only be found through a bitmap of
#: resources_requires (a GIN index), which still costs less than the table's scan, as
#: both are "off" (at 10k rows, analyzed, PostgreSQL scanned the table rather than look
#: up 100 ids). What is "off" is priced very high, not forbidden: without `jit = off`
#: such a price would have PostgreSQL compile the statement first (0.4 s).
_BY_INDEX = (
    "BEGIN READ ONLY; SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL jit = off"
)


def _stack(r: asyncpg.Record) -> StackView:
    return StackView(**{**dict(r), "tags": tuple(r["tags"] or ())})


class Queries:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def stack(self, project_id: str | None, ident: str) -> StackView | None:
        """A live stack by id or name, visible to `project_id` (None: any project)."""
        try:
            stack_id: uuid.UUID | None = uuid.UUID(ident)
        except ValueError:
            stack_id = None
        r = await self._pool.fetchrow(
            f"""SELECT {_STACK} FROM stacks
                WHERE deleted_at IS NULL AND ($1::text IS NULL OR project_id = $1)
                  AND (stack_id = $2 OR ($2 IS NULL AND name = $3))
                ORDER BY created_at DESC LIMIT 1""",
            project_id,
            stack_id,
            ident,
        )
        return _stack(r) if r is not None else None

    async def stacks(self, f: StackFilter) -> list[StackView]:
        column = STACK_SORT_KEYS.get(f.sort_key, "created_at")
        direction = "ASC" if f.sort_dir == "asc" else "DESC"
        clauses = ["($1::text IS NULL OR project_id = $1)"]
        args: list[Any] = [f.project_id]
        if not f.show_deleted:
            clauses.append("deleted_at IS NULL")
        if not f.show_nested:
            clauses.append("owner_stack_id IS NULL")
        for values, expr in (
            (f.names, "name = ANY(${})"),
            (f.statuses, "(action || '_' || status) = ANY(${})"),
            (f.ids, "stack_id = ANY(${})"),
            (f.tags, "tags @> ${}::text[]"),
            (f.tags_any, "tags && ${}::text[]"),
            (f.not_tags, "NOT tags @> ${}::text[]"),
            (f.not_tags_any, "NOT tags && ${}::text[]"),
        ):
            if values:
                args.append(list(values))
                clauses.append(expr.format(len(args)))
        if f.marker is not None:
            args.append(f.marker)
            op = ">" if direction == "ASC" else "<"
            clauses.append(
                f"({column}, stack_id) {op} (SELECT {column}, stack_id FROM stacks "
                f"WHERE stack_id = ${len(args)} AND ($1::text IS NULL OR project_id = $1))"
            )
        args.append(f.limit)
        rows = await self._pool.fetch(
            f"""SELECT {_STACK} FROM stacks WHERE {" AND ".join(clauses)}
                ORDER BY {column} {direction} NULLS LAST, stack_id {direction} LIMIT ${len(args)}""",
            *args,
        )
        return [_stack(r) for r in rows]

    async def stack_tree(self, stack_id: uuid.UUID, depth: int) -> list[NestedStack]:
        """`stack_id` and its live nested stacks down to `depth` levels, parents first."""
        rows = await self._pool.fetch(
            """WITH RECURSIVE tree(stack_id, name, depth, parent_resource) AS (
                   SELECT stack_id, name, 0, NULL::text FROM stacks WHERE stack_id = $1
                   UNION ALL
                   SELECT c.stack_id, c.name, t.depth + 1, r.name
                   FROM tree t
                   JOIN resources r ON r.stack_id = t.stack_id AND r.replaced_by IS NULL
                   JOIN stacks c ON c.owner_stack_id = t.stack_id AND c.stack_id::text = r.physical_id
                                AND c.deleted_at IS NULL
                   WHERE t.depth < $2
               )
               SELECT * FROM tree ORDER BY depth, name""",
            stack_id,
            depth,
        )
        return [NestedStack(r["stack_id"], r["name"], r["depth"], r["parent_resource"]) for r in rows]

    async def secret_templates(self, stack_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, list[uuid.UUID]]:
        """For each stack, the current and previous template ids of it and of its ancestors
        (whose hidden values may have been passed down to it)."""
        rows = await self._pool.fetch(
            """WITH RECURSIVE up(origin, stack_id, owner, depth) AS (
                   SELECT stack_id, stack_id, owner_stack_id, 0 FROM stacks WHERE stack_id = ANY($1::uuid[])
                   UNION ALL
                   SELECT up.origin, p.stack_id, p.owner_stack_id, up.depth + 1
                   FROM up JOIN stacks p ON p.stack_id = up.owner WHERE up.depth < 100
               )
               SELECT up.origin, t.template_id
               FROM up JOIN stacks s ON s.stack_id = up.stack_id,
                    unnest(ARRAY[s.current_template_id, s.previous_template_id]) AS t(template_id)
               WHERE t.template_id IS NOT NULL""",
            list(stack_ids),
        )
        found: dict[uuid.UUID, list[uuid.UUID]] = {}
        for r in rows:
            found.setdefault(r["origin"], []).append(r["template_id"])
        return found

    async def secret_inputs(self, template_ids: Sequence[uuid.UUID]) -> list[asyncpg.Record]:
        """What masking needs of each template: the declared parameters and the values
        given for them (never the resources, however large the template)."""
        return list(
            await self._pool.fetch(
                """SELECT template_id, template -> 'parameters' AS declared, parameters AS given,
                          environment -> 'parameters' AS env_parameters,
                          environment -> 'parameter_defaults' AS env_defaults
                   FROM templates WHERE template_id = ANY($1::uuid[])""",
                list(template_ids),
            )
        )

    async def template(self, template_id: uuid.UUID) -> TemplateRecord | None:
        r = await self._pool.fetchrow(
            """SELECT template_id, template, environment, files, parameters, source
               FROM templates WHERE template_id = $1""",
            template_id,
        )
        if r is None:
            return None
        return TemplateRecord(
            r["template_id"], r["template"], r["environment"], r["files"], r["parameters"], r["source"]
        )

    async def resources(
        self,
        stack_id: uuid.UUID,
        *,
        names: Sequence[str] = (),
        types: Sequence[str] = (),
        statuses: Sequence[str] = (),
        after: ResourceKey | None = None,
        limit: int = 1000,
        with_required_by: bool = False,
        within: IndexedReads | None = None,
    ) -> list[asyncpg.Record]:
        """One page of the stack's current rows (a replacement hides what it replaces), in
        (name, resource_id) order after `after`, with the live nested stack each owns, if
        any (`nested_stack_id`, `nested_stack_name`), and `with_required_by` the names of
        the current rows that require each (`required_by`, sorted; read through
        resources_requires). One statement: an index range scan of resources_page, in its
        order; the cost is the page's, whatever the stack's size and whatever the
        statistics say of it. `statuses` match "COMPLETE" or "CREATE_COMPLETE".
        `within`: on the transaction of `by_index` (one round trip), else in a read-only
        transaction of its own."""
        clauses = ["r.stack_id = $1", "r.replaced_by IS NULL"]
        args: list[Any] = [stack_id]
        for values, expr in (
            (names, "r.name = ANY(${})"),
            (types, "r.type = ANY(${})"),
            (statuses, "(r.status = ANY(${0}) OR (r.action || '_' || r.status) = ANY(${0}))"),
        ):
            if values:
                args.append(list(values))
                clauses.append(expr.format(len(args)))
        if after is not None:
            args.extend(after)
            clauses.append(f"(r.name, r.resource_id) > (${len(args) - 1}, ${len(args)})")
        args.append(limit)
        sql = f"""SELECT {_RESOURCE_VIEW}, c.stack_id AS nested_stack_id, c.name AS nested_stack_name
                  FROM resources r
                  LEFT JOIN stacks c ON c.owner_stack_id = r.stack_id AND c.stack_id::text = r.physical_id
                                    AND c.deleted_at IS NULL
                  WHERE {" AND ".join(clauses)}
                  ORDER BY r.name, r.resource_id LIMIT ${len(args)}"""
        if with_required_by:
            sql = _with_required_by(sql)
        if within is not None:
            return list(await within.connection.fetch(sql, *args))
        async with self.by_index() as reads:
            return list(await reads.connection.fetch(sql, *args))

    @contextlib.asynccontextmanager
    async def by_index(self) -> AsyncIterator[IndexedReads]:
        """A read-only transaction planned under _BY_INDEX, for reads that must go through
        their indexes: its start and the settings are one round trip, each statement one
        more, its end one. Read committed and read only, it holds back no vacuum between
        its statements, however long a list that streams its pages through it takes."""
        async with self._pool.acquire() as conn:
            await conn.execute(_BY_INDEX)
            try:
                yield IndexedReads(conn)
            finally:
                await conn.execute("ROLLBACK")  # read only: nothing to keep, and the settings end

    async def required_by(
        self, stack_id: uuid.UUID, resource_ids: Sequence[int] | None = None
    ) -> dict[int, tuple[str, ...]]:
        """Reverse dependencies: resource_id -> names of the current rows that require it
        (sorted), for `resource_ids` or (None) every row of the stack. For ids, one
        statement reading only the rows that require them (resources_requires); for the
        whole stack, one pass over its rows through a cursor, `REVERSE_CHUNK` rows at a
        time, so a large stack's map is built without holding the event loop or a list
        of every row."""
        if resource_ids is not None:
            if not resource_ids:
                return {}
            async with self.by_index() as reads:
                rows = await reads.connection.fetch(_REQUIRED_BY_IDS, stack_id, list(resource_ids))
            return {r["req"]: tuple(r["names"]) for r in rows}
        # Tuples of text: the garbage collector soon stops tracking them, however long a
        # list request holds the map.
        found: dict[int, tuple[str, ...]] = {}
        async with self._pool.acquire() as conn, conn.transaction(readonly=True):
            async for r in conn.cursor(_REQUIRED_BY, stack_id, prefetch=REVERSE_CHUNK):
                found[r["req"]] = tuple(sorted(r["names"]))
        return found

    async def resource(self, stack_id: uuid.UUID, name: str) -> asyncpg.Record | None:
        """The current row named `name` (index resources_page), as `resources` shows
        it plus its properties, attributes and metadata; its `required_by` is a second
        statement."""
        return await self._pool.fetchrow(
            f"""SELECT {_RESOURCE_VIEW}, r.properties, r.attributes, r.metadata,
                       c.stack_id AS nested_stack_id, c.name AS nested_stack_name
                FROM resources r
                LEFT JOIN stacks c ON c.owner_stack_id = r.stack_id AND c.stack_id::text = r.physical_id
                                  AND c.deleted_at IS NULL
                WHERE r.stack_id = $1 AND r.name = $2 AND r.replaced_by IS NULL
                ORDER BY r.resource_id LIMIT 1""",
            stack_id,
            name,
        )

    async def events(
        self,
        stack_id: uuid.UUID | Sequence[uuid.UUID],
        *,
        where: EventFilter = EventFilter(),
        limit: int = 1000,
        marker: uuid.UUID | None = None,
    ) -> list[asyncpg.Record]:
        """Events of one stack, or of several (a stack and its nested stacks), filtered
        and in order; a marker is looked up among the events being listed only."""
        stacks = [stack_id] if isinstance(stack_id, uuid.UUID) else list(stack_id)
        direction, op = ("ASC", ">") if where.sort_dir == "asc" else ("DESC", "<")
        columns = [EVENT_SORT_KEYS[k] for k in where.sort_keys if k in EVENT_SORT_KEYS]
        columns = list(dict.fromkeys([*columns, "event_seq"]))
        clauses = ["stack_id = ANY($1::uuid[])"]
        args: list[Any] = [stacks]
        for values, expr in (
            (where.names, "resource_name = ANY(${})"),
            (where.actions, "action = ANY(${})"),
            (where.statuses, "(status = ANY(${0}) OR (action || '_' || status) = ANY(${0}))"),
            (where.types, "resource_type = ANY(${})"),
        ):
            if values:
                args.append(list(values))
                clauses.append(expr.format(len(args)))
        if marker is not None:
            args.append(marker)
            key = ", ".join(columns)
            clauses.append(
                f"({key}) {op} (SELECT {key} FROM events WHERE event_id = ${len(args)} "
                "AND stack_id = ANY($1::uuid[]))"
            )
        args.append(limit)
        order = ", ".join(f"{c} {direction}" for c in columns)
        return list(
            await self._pool.fetch(
                f"""SELECT * FROM events WHERE {" AND ".join(clauses)}
                    ORDER BY {order} LIMIT ${len(args)}""",
                *args,
            )
        )

    async def event(self, stack_id: uuid.UUID, event_id: uuid.UUID) -> asyncpg.Record | None:
        return await self._pool.fetchrow(
            "SELECT * FROM events WHERE stack_id = $1 AND event_id = $2", stack_id, event_id
        )

    # -- the dashboard (graph snapshot, live tail, list counts) ----------------

    async def graph_rows(self, stack_id: uuid.UUID) -> tuple[int, list[asyncpg.Record]]:
        """The event cursor, then every current row with its drift flag, for the graph snapshot.

        The cursor is read first, so a client that streams from it may see an event
        twice (applied again, harmlessly) but never misses one."""
        async with self._pool.acquire() as conn:
            cursor: int = await conn.fetchval(
                "SELECT coalesce(max(event_seq), 0) FROM events WHERE stack_id = $1", stack_id
            )
            rows = await conn.fetch(
                """SELECT r.resource_id, r.name, r.type, r.physical_id, r.action, r.status,
                          r.status_reason, r.requires, r.replaces, r.template_id,
                          EXISTS (SELECT 1 FROM drift d WHERE d.resource_id = r.resource_id) AS drifted
                   FROM resources r WHERE r.stack_id = $1 AND r.replaced_by IS NULL
                   ORDER BY r.resource_id""",
                stack_id,
            )
        return cursor, list(rows)

    async def tail(self, stack_id: uuid.UUID, after: int, limit: int) -> list[asyncpg.Record]:
        """One poll of a live stream: the stack's status (every row) and the events after
        `after` (up to `limit`, in order), in a single statement. No row: the stack is gone."""
        return list(
            await self._pool.fetch(
                """SELECT s.action AS stack_action, s.status AS stack_status,
                          s.status_reason AS stack_status_reason, s.deleted_at IS NOT NULL AS deleted,
                          e.event_seq, e.event_id, e.resource_name, e.physical_resource_id,
                          e.resource_type, e.action, e.status, e.reason, e.created_at
                   FROM stacks s
                   LEFT JOIN LATERAL (
                       SELECT * FROM events
                       WHERE events.stack_id = s.stack_id AND events.event_seq > $2
                       ORDER BY events.event_seq LIMIT $3
                   ) e ON true
                   WHERE s.stack_id = $1
                   ORDER BY e.event_seq""",
                stack_id,
                after,
                limit,
            )
        )

    async def resource_counts(self, stack_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, dict[str, int]]:
        """Current resources of each stack, counted by status (INIT, IN_PROGRESS, COMPLETE, FAILED)."""
        rows = await self._pool.fetch(
            """SELECT stack_id, CASE WHEN action = 'INIT' THEN 'INIT' ELSE status END AS status, count(*) AS n
               FROM resources WHERE stack_id = ANY($1::uuid[]) AND replaced_by IS NULL
               GROUP BY 1, 2""",
            list(stack_ids),
        )
        counts: dict[uuid.UUID, dict[str, int]] = {s: {} for s in stack_ids}
        for r in rows:
            counts[r["stack_id"]][r["status"]] = r["n"]
        return counts

    async def observation_summaries(self, stack_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, dict[str, Any]]:
        """Each stack's observation as the stack list shows it: on or off, its interval (s)
        and heal setting, and how many of its resources have drifted now."""
        rows = await self._pool.fetch(
            """SELECT s.stack_id, coalesce(o.enabled, false) AS enabled, o.interval_secs, o.heal,
                      (SELECT count(*) FROM drift d WHERE d.stack_id = s.stack_id) AS drifted
               FROM unnest($1::uuid[]) AS s(stack_id) LEFT JOIN observations o USING (stack_id)""",
            list(stack_ids),
        )
        return {
            r["stack_id"]: {
                "enabled": r["enabled"],
                "interval": r["interval_secs"],
                "heal": bool(r["heal"]),
                "drifted": r["drifted"],
            }
            for r in rows
        }
