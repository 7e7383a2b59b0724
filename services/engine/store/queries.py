"""Read-side statements for the API: stacks, resources, events, templates.

Plain reads outside any convergence transaction; every query is scoped to a
project (or, for admins, all projects) so another project's stacks are
simply not found.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from services.engine.store.tx import TemplateRecord

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


_STACK = """stack_id, project_id, name, action, status, status_reason, current_template_id,
    previous_template_id, disable_rollback, timeout_mins, tags, created_at, updated_at, deleted_at"""


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
        for values, expr in (
            (f.names, "name = ANY(${})"),
            (f.statuses, "(action || '_' || status) = ANY(${})"),
            (f.ids, "stack_id = ANY(${})"),
        ):
            if values:
                args.append(list(values))
                clauses.append(expr.format(len(args)))
        if f.marker is not None:
            args.append(f.marker)
            op = ">" if direction == "ASC" else "<"
            clauses.append(
                f"({column}, stack_id) {op} "
                f"(SELECT {column}, stack_id FROM stacks WHERE stack_id = ${len(args)})"
            )
        args.append(f.limit)
        rows = await self._pool.fetch(
            f"""SELECT {_STACK} FROM stacks WHERE {" AND ".join(clauses)}
                ORDER BY {column} {direction} NULLS LAST, stack_id {direction} LIMIT ${len(args)}""",
            *args,
        )
        return [_stack(r) for r in rows]

    async def count_stacks(self, project_id: str) -> int:
        n: int = await self._pool.fetchval(
            "SELECT count(*) FROM stacks WHERE project_id = $1 AND deleted_at IS NULL", project_id
        )
        return n

    async def template(self, template_id: uuid.UUID) -> TemplateRecord | None:
        r = await self._pool.fetchrow(
            """SELECT template_id, template, environment, files, parameters
               FROM templates WHERE template_id = $1""",
            template_id,
        )
        if r is None:
            return None
        return TemplateRecord(r["template_id"], r["template"], r["environment"], r["files"], r["parameters"])

    async def resources(self, stack_id: uuid.UUID) -> list[asyncpg.Record]:
        """The current row of every resource (a replacement hides what it replaces)."""
        return list(
            await self._pool.fetch(
                """SELECT r.*, ARRAY(SELECT d.name FROM resources d
                                 WHERE d.stack_id = r.stack_id AND r.resource_id = ANY(d.requires)
                                   AND d.replaced_by IS NULL ORDER BY d.name) AS required_by
               FROM resources r WHERE r.stack_id = $1 AND r.replaced_by IS NULL ORDER BY r.resource_id""",
                stack_id,
            )
        )

    async def resource(self, stack_id: uuid.UUID, name: str) -> asyncpg.Record | None:
        rows = [r for r in await self.resources(stack_id) if r["name"] == name]
        return rows[0] if rows else None

    async def mark_unhealthy(self, resource_id: int, *, unhealthy: bool, reason: str) -> None:
        if unhealthy:
            await self._pool.execute(
                """UPDATE resources SET action = 'CHECK', status = 'FAILED', status_reason = $2,
                       version = version + 1, updated_at = now() WHERE resource_id = $1""",
                resource_id,
                reason,
            )
        else:
            await self._pool.execute(
                """UPDATE resources SET action = 'CHECK', status = 'COMPLETE', status_reason = $2,
                       version = version + 1, updated_at = now()
                   WHERE resource_id = $1 AND action = 'CHECK' AND status = 'FAILED'""",
                resource_id,
                reason,
            )

    async def events(
        self,
        stack_id: uuid.UUID,
        *,
        resource_name: str | None = None,
        limit: int = 1000,
        marker: uuid.UUID | None = None,
        sort_dir: str = "asc",
    ) -> list[asyncpg.Record]:
        direction, op = ("ASC", ">") if sort_dir == "asc" else ("DESC", "<")
        return list(
            await self._pool.fetch(
                f"""SELECT * FROM events
                WHERE stack_id = $1 AND ($2::text IS NULL OR resource_name = $2)
                  AND ($3::uuid IS NULL OR event_seq {op} (SELECT event_seq FROM events WHERE event_id = $3))
                ORDER BY event_seq {direction} LIMIT $4""",
                stack_id,
                resource_name,
                marker,
                limit,
            )
        )

    async def event(self, stack_id: uuid.UUID, event_id: uuid.UUID) -> asyncpg.Record | None:
        return await self._pool.fetchrow(
            "SELECT * FROM events WHERE stack_id = $1 AND event_id = $2", stack_id, event_id
        )
