"""Statements of the convergence engine, run inside one transaction (`Tx`).

The async shell opens a `Tx` per message (or operation), runs the reads and
writes a decision needs, and commits them together with the inbox record
and the outbox messages, so an effect and the messages it causes are never
separated. Rows come back as the frozen records of `core.model`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from services.engine.core.model import (
    Action,
    GraphNode,
    Node,
    ResourceId,
    ResourceRow,
    StackId,
    StackRow,
    Status,
    TemplateId,
    TraversalId,
)
from services.engine.store.observing import ObservationStatements
from services.engine.store.parity import ParityStatements
from services.engine.store.prefetch import NodeState, Prefetched, Watched
from services.engine.store.recovery import RecoveryStatements
from services.engine.store.snapshots import SnapshotStatements
from services.engine.store.software_configs import SoftwareConfigStatements
from services.engine.store.software_deployments import SoftwareDeploymentStatements
from services.engine.store.tenancy import TenancyStatements

Conn = asyncpg.Connection | PoolConnectionProxy

_RESOURCE_COLUMNS = """resource_id, stack_id, name, type, physical_id, action, status, status_reason,
    properties, attributes, requires, replaces, replaced_by, template_id, deletion_policy,
    current_job, job_node, job_properties, job_requires, job_template_id, traversal_id, version,
    waiting_traversal, waiting_node, external"""

_STACK_COLUMNS = """stack_id, project_id, name, action, status, status_reason, current_traversal,
    current_template_id, previous_template_id, disable_rollback, timeout_mins, owner_stack_id,
    owner_resource_id, owner_job_id, nested_depth, root_stack_id"""


def _stack(r: asyncpg.Record) -> StackRow:
    return StackRow(
        stack_id=r["stack_id"],
        project_id=r["project_id"],
        name=r["name"],
        action=Action(r["action"]),
        status=Status(r["status"]),
        status_reason=r["status_reason"],
        current_traversal=r["current_traversal"],
        current_template_id=r["current_template_id"],
        previous_template_id=r["previous_template_id"],
        disable_rollback=r["disable_rollback"],
        timeout_mins=r["timeout_mins"],
        owner_stack_id=r["owner_stack_id"],
        owner_resource_id=r["owner_resource_id"],
        owner_job_id=r["owner_job_id"],
        nested_depth=r["nested_depth"],
        root_stack_id=r["root_stack_id"],
    )


def _resource(r: asyncpg.Record) -> ResourceRow:
    return ResourceRow(
        resource_id=r["resource_id"],
        stack_id=r["stack_id"],
        name=r["name"],
        type=r["type"],
        physical_id=r["physical_id"],
        action=Action(r["action"]),
        status=Status(r["status"]),
        status_reason=r["status_reason"],
        properties=r["properties"],
        attributes=r["attributes"] or {},
        requires=frozenset(r["requires"] or ()),
        replaces=r["replaces"],
        replaced_by=r["replaced_by"],
        template_id=r["template_id"],
        deletion_policy=r["deletion_policy"],
        current_job=r["current_job"],
        job_node=r["job_node"],
        job_properties=r["job_properties"],
        job_requires=frozenset(r["job_requires"]) if r["job_requires"] is not None else None,
        job_template_id=r["job_template_id"],
        traversal_id=r["traversal_id"],
        version=r["version"],
        waiting_traversal=r["waiting_traversal"],
        waiting_node=r["waiting_node"],
        external=r["external"],
    )


@dataclass(frozen=True)
class FinishedNode:
    direct: tuple[Node, ...]  # dependents to trigger now
    synced: tuple[Node, ...]  # dependents that are sync points


@dataclass(frozen=True)
class TemplateRecord:
    template_id: TemplateId
    template: Mapping[str, Any]
    environment: Mapping[str, Any]
    files: Mapping[str, str]
    parameters: Mapping[str, Any]
    source: str | None = None  # the template's text as the user sent it, if they sent text


@dataclass(frozen=True)
class EventRecord:
    stack_id: StackId
    resource_name: str
    physical_resource_id: str | None
    resource_type: str
    action: str
    status: str
    reason: str


class Tx(
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
        self._engine_id = engine_id  # written on outbox rows (the engine's lease)

    # -- a batch's reads (services/engine/store/prefetch.py) -----------------------

    async def prefetch(
        self,
        *,
        resources: Iterable[int],
        stacks: Iterable[StackId],
        nodes: Iterable[tuple[TraversalId, Node]],
    ) -> None:
        """Read these rows now, one statement per table (resources first, then the
        stacks named and those of the resources found); `resource`, `stack` and `node`
        answer from them until they are written. The resource rows are locked, in
        resource id order, as an operation claims its stack's rows (`claim_resources`):
        a batch and an operation, or two batches, never wait for each other in a cycle."""
        reads = Prefetched()
        resource_ids = sorted(set(resources))
        rows = await self._raw.fetch(
            f"""SELECT {_RESOURCE_COLUMNS} FROM resources WHERE resource_id = ANY($1::bigint[])
                ORDER BY resource_id FOR UPDATE""",
            resource_ids,
        )
        reads.resources = dict.fromkeys(resource_ids)
        reads.resources.update((r["resource_id"], _resource(r)) for r in rows)
        stack_ids = sorted(set(stacks) | {r.stack_id for r in reads.resources.values() if r is not None})
        rows = await self._raw.fetch(
            f"""SELECT {_STACK_COLUMNS} FROM stacks
                WHERE stack_id = ANY($1::uuid[]) AND deleted_at IS NULL""",
            stack_ids,
        )
        reads.stacks = dict.fromkeys(stack_ids)
        reads.stacks.update((r["stack_id"], _stack(r)) for r in rows)
        keys = sorted(set(nodes))
        rows = await self._raw.fetch(
            """SELECT tn.traversal_id, tn.node, tn.requires_count, tn.done
               FROM traversal_nodes tn
               JOIN unnest($1::uuid[], $2::bigint[]) AS k(t, n) ON tn.traversal_id = k.t AND tn.node = k.n""",
            [k[0] for k in keys],
            [k[1] for k in keys],
        )
        reads.nodes = dict.fromkeys(keys)
        reads.nodes.update(
            ((r["traversal_id"], r["node"]), NodeState(r["requires_count"], r["done"])) for r in rows
        )
        self._reads = reads
        self._c = Watched(self._raw, reads)

    # -- inbox / outbox -----------------------------------------------------

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

    async def add_outbox(self, messages: Sequence[tuple[str, Mapping[str, Any]]]) -> list[int]:
        if not messages:
            return []
        rows = await self._c.fetch(
            """INSERT INTO outbox (queue, body, engine_id)
               SELECT q, b, $3 FROM unnest($1::text[], $2::jsonb[]) AS m(q, b) RETURNING outbox_id""",
            [q for q, _ in messages],
            [dict(body) for _, body in messages],
            self._engine_id,
        )
        return [r["outbox_id"] for r in rows]

    # -- templates and stacks -------------------------------------------------

    async def insert_template(self, stack_id: StackId, record: TemplateRecord) -> None:
        await self._c.execute(
            """INSERT INTO templates (template_id, stack_id, template, environment, files, parameters, source)
               VALUES ($1, $2, $3, $4, $5, $6, $7)""",
            record.template_id,
            stack_id,
            dict(record.template),
            dict(record.environment),
            dict(record.files),
            dict(record.parameters),
            record.source,
        )

    async def template(self, template_id: TemplateId) -> TemplateRecord | None:
        r = await self._c.fetchrow(
            """SELECT template_id, template, environment, files, parameters, source
               FROM templates WHERE template_id = $1""",
            template_id,
        )
        if r is None:
            return None
        return TemplateRecord(
            r["template_id"], r["template"], r["environment"], r["files"], r["parameters"], r["source"]
        )

    async def insert_stack(
        self,
        stack_id: StackId,
        *,
        project_id: str,
        name: str,
        disable_rollback: bool,
        timeout_mins: int | None,
        tags: Sequence[str],
        owner: tuple[StackId, ResourceId] | None = None,
        nested_depth: int = 0,
        root_stack_id: StackId | None = None,
    ) -> bool:
        """Create the stack row (INIT); False when the name is taken in the project.
        A child stack names its `owner`: the parent stack and the resource owning it,
        and the top of its tree (`root_stack_id`; a top-level stack is its own)."""
        r = await self._c.fetchval(
            """INSERT INTO stacks (stack_id, project_id, name, action, status, disable_rollback,
                                   timeout_mins, tags, owner_stack_id, owner_resource_id, nested_depth,
                                   root_stack_id)
               VALUES ($1, $2, $3, 'INIT', 'COMPLETE', $4, $5, $6, $7, $8, $9, coalesce($10::uuid, $1::uuid))
               ON CONFLICT DO NOTHING RETURNING 1""",
            stack_id,
            project_id,
            name,
            disable_rollback,
            timeout_mins,
            list(tags),
            owner[0] if owner else None,
            owner[1] if owner else None,
            nested_depth,
            root_stack_id,
        )
        return r is not None

    async def set_owner_job(self, stack_id: StackId, job_id: str | None) -> None:
        """The parent's job the child's operation (just begun) answers."""
        await self._c.execute("UPDATE stacks SET owner_job_id = $2 WHERE stack_id = $1", stack_id, job_id)

    async def set_timeout(self, stack_id: StackId, minutes: int | None) -> None:
        await self._c.execute("UPDATE stacks SET timeout_mins = $2 WHERE stack_id = $1", stack_id, minutes)

    async def take_owner_job(self, stack_id: StackId) -> str | None:
        """The parent's job the child's operation answers, now answered (cleared);
        None if there is none (a top-level stack, or answered already)."""
        job: str | None = await self._c.fetchval(
            """UPDATE stacks s SET owner_job_id = NULL
               FROM (SELECT stack_id, owner_job_id FROM stacks WHERE stack_id = $1 FOR UPDATE) old
               WHERE s.stack_id = old.stack_id AND old.owner_job_id IS NOT NULL
               RETURNING old.owner_job_id""",
            stack_id,
        )
        return job

    async def stack(self, stack_id: StackId, *, lock: bool = False) -> StackRow | None:
        if not lock and self._reads is not None and stack_id in self._reads.stacks:
            return self._reads.stacks[stack_id]
        sql = f"SELECT {_STACK_COLUMNS} FROM stacks WHERE stack_id = $1 AND deleted_at IS NULL"
        r = await self._c.fetchrow(sql + (" FOR UPDATE" if lock else ""), stack_id)
        return _stack(r) if r is not None else None

    async def stack_by_name(self, project_id: str, name: str) -> StackRow | None:
        r = await self._c.fetchrow(
            f"SELECT {_STACK_COLUMNS} FROM stacks WHERE project_id = $1 AND name = $2 AND deleted_at IS NULL",
            project_id,
            name,
        )
        return _stack(r) if r is not None else None

    async def begin_operation(
        self,
        stack_id: StackId,
        *,
        traversal: TraversalId,
        template_id: TemplateId,
        previous_template_id: TemplateId | None,
        action: Action,
        reason: str,
    ) -> None:
        await self._c.execute(
            """UPDATE stacks SET current_traversal = $2, current_template_id = $3,
                   previous_template_id = $4, action = $5, status = 'IN_PROGRESS',
                   status_reason = $6, updated_at = now()
               WHERE stack_id = $1""",
            stack_id,
            traversal,
            template_id,
            previous_template_id,
            action.value,
            reason,
        )

    async def overdue_stacks(self, now: float, *, limit: int = 20) -> list[StackRow]:
        """Stacks whose operation has run longer than its timeout_mins; each taken by
        one engine (SKIP LOCKED) so engines share the work."""
        rows = await self._c.fetch(
            f"""SELECT {", ".join(f"s.{c.strip()}" for c in _STACK_COLUMNS.split(","))}
                FROM stacks s JOIN traversals t ON t.traversal_id = s.current_traversal
                WHERE s.status = 'IN_PROGRESS' AND s.timeout_mins IS NOT NULL AND s.deleted_at IS NULL
                  AND t.created_at + make_interval(mins => s.timeout_mins) < to_timestamp($1)
                ORDER BY t.created_at LIMIT $2 FOR UPDATE OF s SKIP LOCKED""",
            now,
            limit,
        )
        return [_stack(r) for r in rows]

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

    async def stop_operation(self, stack_id: StackId, traversal: TraversalId, reason: str) -> None:
        """End the running operation where it is: a fresh traversal id with no graph
        stops its checks; the stack is FAILED with `reason`."""
        await self._c.execute(
            """UPDATE stacks SET current_traversal = $2, status = 'FAILED', status_reason = $3,
                   updated_at = now() WHERE stack_id = $1""",
            stack_id,
            traversal,
            reason,
        )

    async def set_stack_status(
        self, stack_id: StackId, traversal: TraversalId, status: Status, reason: str, *, deleted: bool = False
    ) -> bool:
        """Set the outcome of traversal `traversal`; False if a newer one took over."""
        r = await self._c.fetchval(
            """UPDATE stacks SET status = $3, status_reason = $4, updated_at = now(),
                   deleted_at = CASE WHEN $5 THEN now() ELSE deleted_at END
               WHERE stack_id = $1 AND current_traversal = $2 RETURNING 1""",
            stack_id,
            traversal,
            status.value,
            reason,
            deleted,
        )
        return r is not None

    # -- resources ------------------------------------------------------------

    async def resources(self, stack_id: StackId) -> list[ResourceRow]:
        rows = await self._c.fetch(
            f"SELECT {_RESOURCE_COLUMNS} FROM resources WHERE stack_id = $1 ORDER BY resource_id", stack_id
        )
        return [_resource(r) for r in rows]

    async def claim_resources(self, stack_id: StackId) -> list[ResourceRow]:
        """Lock every row of the stack (in id order, so concurrent claims cannot
        deadlock) and bump its version, returning the rows as they now are.

        A new traversal starts from these rows; any decision taken from an
        earlier read of them fails its compare-and-swap and is made again.
        """
        rows = await self._c.fetch(
            f"""WITH claimed AS (
                    SELECT resource_id FROM resources WHERE stack_id = $1 ORDER BY resource_id FOR UPDATE
                )
                UPDATE resources r SET version = r.version + 1 FROM claimed
                WHERE r.resource_id = claimed.resource_id
                RETURNING {", ".join(f"r.{c.strip()}" for c in _RESOURCE_COLUMNS.split(","))}""",
            stack_id,
        )
        return sorted((_resource(r) for r in rows), key=lambda row: row.resource_id)

    async def lock_resources(self, stack_id: StackId) -> None:
        """Lock every row of the stack (in id order), changing nothing: to take the locks a
        later step needs before others, in the order the rest of the engine takes them."""
        await self._c.execute(
            "SELECT resource_id FROM resources WHERE stack_id = $1 ORDER BY resource_id FOR UPDATE", stack_id
        )

    async def resource(self, resource_id: int, *, lock: bool = False) -> ResourceRow | None:
        if not lock and self._reads is not None and resource_id in self._reads.resources:
            return self._reads.resources[resource_id]
        sql = f"SELECT {_RESOURCE_COLUMNS} FROM resources WHERE resource_id = $1"
        r = await self._c.fetchrow(sql + (" FOR UPDATE" if lock else ""), resource_id)
        return _resource(r) if r is not None else None

    async def current_resources(self, stack_id: StackId, names: Iterable[str]) -> dict[str, ResourceRow]:
        """The current row (not replaced) of each named resource."""
        rows = await self._c.fetch(
            f"""SELECT {_RESOURCE_COLUMNS} FROM resources
                WHERE stack_id = $1 AND name = ANY($2::text[]) AND replaced_by IS NULL""",
            stack_id,
            list(names),
        )
        return {r["name"]: _resource(r) for r in rows}

    async def resource_by_physical_id(
        self, stack_id: StackId, physical_id: str, *, lock: bool = False
    ) -> ResourceRow | None:
        r = await self._c.fetchrow(
            f"""SELECT {_RESOURCE_COLUMNS} FROM resources
                WHERE stack_id = $1 AND physical_id = $2 AND replaced_by IS NULL"""
            + (" FOR UPDATE" if lock else ""),
            stack_id,
            physical_id,
        )
        return _resource(r) if r is not None else None

    async def waiting_conditions(
        self, stack_id: StackId, type_name: str, handle_ref: str
    ) -> list[ResourceRow]:
        """Rows of `type_name` whose job in flight waits on the handle `handle_ref`."""
        rows = await self._c.fetch(
            f"""SELECT {_RESOURCE_COLUMNS} FROM resources
                WHERE stack_id = $1 AND type = $2 AND current_job IS NOT NULL
                  AND job_properties ->> 'handle' = $3""",
            stack_id,
            type_name,
            handle_ref,
        )
        return [_resource(r) for r in rows]

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

    async def update_resource(self, row: ResourceRow, **changes: Any) -> bool:
        """Compare-and-swap on `version`: False if someone changed the row since it was read."""
        columns = list(changes)
        assignments = ", ".join(f"{c} = ${i + 3}" for i, c in enumerate(columns))
        self._forget_resource(row.resource_id)
        r = await self._raw.fetchval(
            f"""UPDATE resources SET {assignments}, version = version + 1, updated_at = now()
                WHERE resource_id = $1 AND version = $2 RETURNING 1""",
            row.resource_id,
            row.version,
            *[_db_value(changes[c]) for c in columns],
        )
        return r is not None

    def _forget_resource(self, resource_id: int) -> None:
        if self._reads is not None:
            self._reads.resources.pop(resource_id, None)

    async def delete_resource(self, row: ResourceRow) -> bool:
        """Compare-and-swap delete: False if the row changed since it was read."""
        self._forget_resource(row.resource_id)
        r = await self._raw.fetchval(
            "DELETE FROM resources WHERE resource_id = $1 AND version = $2 RETURNING 1",
            row.resource_id,
            row.version,
        )
        return r is not None

    # -- traversal graph ------------------------------------------------------

    async def start_traversal(
        self, stack_id: StackId, traversal: TraversalId, graph: Mapping[Node, GraphNode]
    ) -> None:
        """Store the graph of `traversal`. Older traversals of the stack are left
        alone (checks of them may still be committing) and pruned later.

        The traversal counts its sinks (nodes nothing depends on) down, not every
        node: a node is checked only once all it requires is done, so the
        traversal is over exactly when its last sink is; the other nodes'
        completions never touch the traversal's row (`count_down`)."""
        sinks = sum(1 for n in graph.values() if not n.dependents)
        await self._c.execute(
            "INSERT INTO traversals (traversal_id, stack_id, remaining) VALUES ($1, $2, $3)",
            traversal,
            stack_id,
            sinks,
        )

        def split(n: GraphNode) -> tuple[list[Node], list[Node]]:
            direct = sorted(d for d in n.dependents if len(graph[d].requires) == 1)
            return direct, sorted(d for d in n.dependents if len(graph[d].requires) > 1)

        await self._c.copy_records_to_table(
            "traversal_nodes",
            columns=["traversal_id", "node", "requires_count", "direct", "synced"],
            records=[(traversal, n.node, len(n.requires), *split(n)) for n in graph.values()],
        )

    async def node(self, traversal: TraversalId, node: Node) -> NodeState | None:
        if self._reads is not None and (traversal, node) in self._reads.nodes:
            return self._reads.nodes[(traversal, node)]
        r = await self._c.fetchrow(
            "SELECT requires_count, done FROM traversal_nodes WHERE traversal_id = $1 AND node = $2",
            traversal,
            node,
        )
        return NodeState(r["requires_count"], r["done"]) if r is not None else None

    async def satisfy(
        self, reports: Iterable[tuple[TraversalId, Node, Node]]
    ) -> list[tuple[TraversalId, Node]]:
        """Record each (traversal, sync point, finished predecessor) of `reports`, in one
        statement; the sync points that this made ready.

        The rows are locked in (traversal, node) order, so batches of two engines
        never deadlock on them, and the lock makes it atomic: of two engines
        reporting the last two predecessors at once, exactly one sees the node
        become ready. A predecessor reported again changes nothing.
        """
        entries = sorted(set(reports))
        if not entries:
            return []
        rows = await self._raw.fetch(  # `satisfied` is not prefetched: nothing to forget
            """WITH reported AS (
                   SELECT t, n, array_agg(b) AS bys
                   FROM unnest($1::uuid[], $2::bigint[], $3::bigint[]) AS r(t, n, b) GROUP BY t, n),
               locked AS (
                   SELECT tn.traversal_id, tn.node, tn.satisfied, r.bys
                   FROM traversal_nodes tn JOIN reported r ON tn.traversal_id = r.t AND tn.node = r.n
                   ORDER BY tn.traversal_id, tn.node FOR UPDATE OF tn),
               added AS (
                   SELECT traversal_id, node,
                          satisfied || ARRAY(SELECT DISTINCT b FROM unnest(bys) AS b
                                             WHERE NOT b = ANY(satisfied) ORDER BY b) AS now_satisfied,
                          cardinality(satisfied) AS before
                   FROM locked)
               UPDATE traversal_nodes tn SET satisfied = a.now_satisfied
               FROM added a
               WHERE tn.traversal_id = a.traversal_id AND tn.node = a.node
                 AND cardinality(a.now_satisfied) > a.before
               RETURNING tn.traversal_id, tn.node,
                         cardinality(a.now_satisfied) = tn.requires_count AS ready""",
            [e[0] for e in entries],
            [e[1] for e in entries],
            [e[2] for e in entries],
        )
        return sorted((r["traversal_id"], r["node"]) for r in rows if r["ready"])

    async def finish_node(self, traversal: TraversalId, node: Node) -> FinishedNode | None:
        """Mark `node` done; None if it was done already (a duplicate report).

        Callers report the dependents next (`satisfy`) and count the traversal's
        sinks down last (`count_down`), so row locks are always taken in the order
        node -> dependents -> traversal -> stack.
        """
        if self._reads is not None:
            self._reads.nodes.pop((traversal, node), None)
        r = await self._raw.fetchrow(
            """UPDATE traversal_nodes SET done = true
               WHERE traversal_id = $1 AND node = $2 AND NOT done RETURNING direct, synced""",
            traversal,
            node,
        )
        if r is None:
            return None
        return FinishedNode(tuple(r["direct"]), tuple(r["synced"]))

    async def count_down(self, traversal: TraversalId, sinks: int = 1) -> int:
        """`sinks` more sinks of `traversal` are done; the number still to do (0: the
        traversal is over). Only sinks are counted, so this row is locked only by
        the completions that may end the traversal (`start_traversal`)."""
        remaining: int = await self._c.fetchval(
            "UPDATE traversals SET remaining = remaining - $2 WHERE traversal_id = $1 RETURNING remaining",
            traversal,
            sinks,
        )
        return remaining

    async def unfinished_nodes(self, traversal: TraversalId, *, limit: int = 20) -> list[Node]:
        rows = await self._c.fetch(
            "SELECT node FROM traversal_nodes WHERE traversal_id = $1 AND NOT done ORDER BY node LIMIT $2",
            traversal,
            limit,
        )
        return [r["node"] for r in rows]

    # -- events ---------------------------------------------------------------

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


def _db_value(value: Any) -> Any:
    if isinstance(value, frozenset | set):
        return sorted(value)
    if isinstance(value, Action | Status):
        return value.value
    return value
