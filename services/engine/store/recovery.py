"""Statements of recovery: which stacks have work in flight, and what that work is.

Where it sits: mixed into `Tx`, used by `services.engine.recovery` in one
transaction per batch of stacks. The stacks are taken with
`FOR NO KEY UPDATE SKIP LOCKED` (checks' share locks neither hold them up nor
hide them), so exactly one engine recovers a given stack at a
time; each recovery is recorded (`stack_recoveries`), so a stack is
recovered at most once per stall time. Only the stack rows are locked: the
resource rows are read, never locked, so recovery cannot deadlock with a
check or an operation (which lock rows first, then the stack).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from services.engine.core.model import Node, StackId, TraversalId
from services.engine.core.recovery import PendingNode
from services.engine.store.graph import OWN_OR_BASE_NODES

if TYPE_CHECKING:
    from services.engine.store.driver import Conn

# Stacks with an operation in progress, and stacks with a row whose job is in
# flight (index resources_current_job), whatever the stack's status.
_BUSY = """busy AS (
    SELECT stack_id FROM stacks WHERE status = 'IN_PROGRESS' AND deleted_at IS NULL
    UNION SELECT stack_id FROM resources WHERE current_job IS NOT NULL)"""


@dataclass(frozen=True)
class JobFacts:
    """What the row of a job in flight says beyond `ResourceRow`."""

    observing_job: str | None  # the job whose "in progress" answer was recorded
    updated_at: datetime  # the row's last change


class RecoveryStatements:
    _c: Conn

    async def busy_stacks(self, *, after: StackId | None, limit: int) -> list[StackId]:
        """Every stack with work in flight (an operation in progress, or a job on a
        row), in id order after `after`; locked, skipping those another engine holds."""
        rows = await self._c.fetch(
            f"""WITH {_BUSY}
                SELECT s.stack_id FROM stacks s JOIN busy USING (stack_id)
                WHERE s.deleted_at IS NULL AND ($1::uuid IS NULL OR s.stack_id > $1)
                ORDER BY s.stack_id LIMIT $2 FOR NO KEY UPDATE OF s SKIP LOCKED""",
            after,
            limit,
        )
        return [r["stack_id"] for r in rows]

    async def stalled_stacks(
        self, *, seconds: float, now: float, after: StackId | None, limit: int
    ) -> list[StackId]:
        """Stacks nothing has moved for `seconds` (and not recovered for as long):
        an operation in progress with no event and no stack change, or another
        stack with a row whose job heard nothing. Locked as `busy_stacks`. An
        operation paused at a hook (a breakpoint) waits for its user, not stalled."""
        rows = await self._c.fetch(
            f"""WITH {_BUSY}
                SELECT s.stack_id FROM stacks s JOIN busy USING (stack_id)
                LEFT JOIN stack_recoveries sr USING (stack_id)
                WHERE s.deleted_at IS NULL AND ($3::uuid IS NULL OR s.stack_id > $3)
                  AND coalesce(sr.recovered_at, '-infinity') < to_timestamp($1) - make_interval(secs => $2)
                  AND CASE WHEN s.status = 'IN_PROGRESS' THEN
                        greatest(coalesce(s.updated_at, s.created_at),
                                 (SELECT e.created_at FROM events e WHERE e.stack_id = s.stack_id
                                  ORDER BY e.event_seq DESC LIMIT 1))
                        < to_timestamp($1) - make_interval(secs => $2)
                        AND NOT EXISTS (SELECT 1 FROM resources h
                                        WHERE h.stack_id = s.stack_id AND h.gate_waiting LIKE 'pre-%'
                                          AND h.gate_traversal = s.current_traversal)
                      ELSE EXISTS (SELECT 1 FROM resources r
                                   WHERE r.stack_id = s.stack_id AND r.current_job IS NOT NULL
                                     AND r.updated_at < to_timestamp($1) - make_interval(secs => $2))
                      END
                ORDER BY s.stack_id LIMIT $4 FOR NO KEY UPDATE OF s SKIP LOCKED""",
            now,
            seconds,
            after,
            limit,
        )
        return [r["stack_id"] for r in rows]

    async def job_facts(self, stack_id: StackId) -> dict[int, JobFacts]:
        """By resource id, for each row of the stack with a job in flight."""
        rows = await self._c.fetch(
            """SELECT resource_id, observing_job, updated_at FROM resources
               WHERE stack_id = $1 AND current_job IS NOT NULL""",
            stack_id,
        )
        return {r["resource_id"]: JobFacts(r["observing_job"], r["updated_at"]) for r in rows}

    async def pending_nodes(self, traversal: TraversalId) -> list[PendingNode]:
        """The nodes of `traversal` not done yet, with the dependents each holds back."""
        nodes = OWN_OR_BASE_NODES.format(t="$1", own_node="", base_node="")  # its rows and its base's
        rows = await self._c.fetch(
            f"SELECT DISTINCT ON (node) node, direct, synced, done FROM ({nodes}) n ORDER BY node, rank",
            traversal,
        )
        return [
            PendingNode(Node(r["node"]), tuple(map(Node, r["direct"])), tuple(map(Node, r["synced"])))
            for r in rows
            if not r["done"]
        ]

    async def mark_recovered(self, stack_ids: Sequence[StackId], *, now: float) -> None:
        """Record that these stacks' work in flight was sent again at `now`."""
        await self._c.execute(
            """INSERT INTO stack_recoveries (stack_id, recovered_at)
               SELECT unnest($1::uuid[]), to_timestamp($2)
               ON CONFLICT (stack_id) DO UPDATE SET recovered_at = excluded.recovered_at""",
            list(stack_ids),
            now,
        )
