"""Statements of stack rows (mixed into `Tx`): creating a stack, its operations and outcome.

Where it sits: `services.engine.operations` inserts a stack and begins each
operation on it (a fresh traversal id and goal, `begin_operation`); checks read
the stack (`stack`, served from a batch's prefetched rows when there are) to
know whether their traversal is still the current one; the end of a traversal
sets its outcome with a compare-and-set on that id (`set_stack_status`), so a
newer operation is never overwritten by an older one. Timeouts (`overdue_stacks`)
are shared between engines with SKIP LOCKED (`FOR NO KEY UPDATE`: checks' share
locks neither hold them up nor hide a stack from them); a child stack records the parent's
job its operation answers (`set_owner_job`, `take_owner_job`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from services.engine.core.model import Action, ResourceId, StackId, StackRow, Status, TemplateId, TraversalId
from services.engine.store.driver import Conn
from services.engine.store.prefetch import Prefetched
from services.engine.store.rows import STACK_COLUMNS, stack_row
from shared.errors import ConflictError


class StackStatements:
    _c: Conn  # the transaction's connection (`Tx`; `Watched` while prefetched rows are served)
    _reads: Prefetched | None
    _moved: set[StackId]  # stacks whose traversal this transaction moved (`confirm_traversals`)

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
        """The stack's row; `lock`: for an operation, which changes it (`FOR UPDATE`, which
        waits for the transactions confirming jobs of its traversal: `confirm_traversals`)."""
        if not lock and self._reads is not None and stack_id in self._reads.stacks:
            return self._reads.stacks[stack_id]
        sql = f"SELECT {STACK_COLUMNS} FROM stacks WHERE stack_id = $1 AND deleted_at IS NULL"
        r = await self._c.fetchrow(sql + (" FOR UPDATE" if lock else ""), stack_id)
        return stack_row(r) if r is not None else None

    async def stack_by_name(self, project_id: str, name: str) -> StackRow | None:
        r = await self._c.fetchrow(
            f"SELECT {STACK_COLUMNS} FROM stacks WHERE project_id = $1 AND name = $2 AND deleted_at IS NULL",
            project_id,
            name,
        )
        return stack_row(r) if r is not None else None

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
        self._moved.add(stack_id)
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

    async def confirm_traversals(self, issued: Iterable[tuple[StackId, TraversalId]]) -> None:
        """Raise `ConflictError` unless each stack still runs the traversal named with it:
        the jobs this transaction issued for those traversals must not commit once an
        update has preempted them. The stack rows stay share-locked (`FOR KEY SHARE`)
        until the commit, so an update's `stack(lock=True)` waits for that, not longer
        (the status changes of other checks, `FOR NO KEY UPDATE`, do not wait at all).
        A stack whose traversal this transaction moved itself (`begin_operation`, after a
        compare-and-set on the one it ran) is left out: its row is locked since."""
        wanted = {(s, t) for s, t in issued if s not in self._moved}  # moved here: locked since
        if not wanted:
            return
        rows = await self._c.fetch(
            """SELECT stack_id, current_traversal FROM stacks WHERE stack_id = ANY($1::uuid[])
               ORDER BY stack_id FOR KEY SHARE""",
            sorted({s for s, _ in wanted}),
        )
        now = {r["stack_id"]: r["current_traversal"] for r in rows}
        for stack_id, traversal in sorted(wanted):
            if now.get(stack_id) != traversal:
                raise ConflictError(f"stack {stack_id} was preempted while jobs of {traversal} were issued")

    async def overdue_stacks(self, now: float, *, limit: int = 20) -> list[StackRow]:
        """Stacks whose operation has run longer than its timeout_mins; each taken by
        one engine (SKIP LOCKED) so engines share the work."""
        rows = await self._c.fetch(
            f"""SELECT {", ".join(f"s.{c.strip()}" for c in STACK_COLUMNS.split(","))}
                FROM stacks s JOIN traversals t ON t.traversal_id = s.current_traversal
                WHERE s.status = 'IN_PROGRESS' AND s.timeout_mins IS NOT NULL AND s.deleted_at IS NULL
                  AND t.created_at + make_interval(mins => s.timeout_mins) < to_timestamp($1)
                ORDER BY t.created_at LIMIT $2 FOR NO KEY UPDATE OF s SKIP LOCKED""",
            now,
            limit,
        )
        return [stack_row(r) for r in rows]

    async def stop_operation(self, stack_id: StackId, traversal: TraversalId, reason: str) -> None:
        """End the running operation where it is: a fresh traversal id with no graph
        stops its checks; the stack is FAILED with `reason`."""
        self._moved.add(stack_id)
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
        """Set the outcome of traversal `traversal`, once; False if a newer one took over
        or this one has ended already (a failed operation does not complete later)."""
        r = await self._c.fetchval(
            """UPDATE stacks SET status = $3, status_reason = $4, updated_at = now(),
                   deleted_at = CASE WHEN $5 THEN now() ELSE deleted_at END
               WHERE stack_id = $1 AND current_traversal = $2 AND status = 'IN_PROGRESS'
               RETURNING 1""",
            stack_id,
            traversal,
            status.value,
            reason,
            deleted,
        )
        return r is not None
