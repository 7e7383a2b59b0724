"""Stack snapshots, restore and export (async shell).

Where it sits: the API's snapshot and export routes call `Snapshots`. Taking a
snapshot is one transaction: the stack's document (`core.snapshots`: template,
environment, files, parameters, tags, resources) is stored as an
IN_PROGRESS snapshot whose id is the traversal id of a SNAPSHOT action over
the stack's resources (a stack action, like check: SNAPSHOT_IN_PROGRESS,
then SNAPSHOT_COMPLETE). Each resource whose type takes snapshots gets a job
(`ResourceType.snapshot`); what it kept is recorded as the job ends
(`job_ended`, from `convergence.results`), and when the action ends (`snapshot_ended`,
from `nested.answer.Answers.stack_ended`, which every end of an operation
passes through) the snapshot is COMPLETE (or FAILED) with it. A restore is an
update back to the snapshot's goal (stack action RESTORE); export answers
the document without storing anything.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import structlog

from services.engine.core.model import Action, ResourceRow, StackId, StackRow, Status, TraversalId
from services.engine.core.snapshots import (
    COMPLETE,
    IN_PROGRESS,
    restore_goal,
    shown_status,
    stack_document,
)
from services.engine.core.sources import RANDOM_IDS, Ids
from services.engine.effects import Effects
from services.engine.goals import Goal
from services.engine.nested.answer import Answers
from services.engine.operations import Operations, Refused, StackNotFound, retrying
from services.engine.outbox import Outbox
from services.engine.snapshotting import snapshot_ended
from services.engine.store import Store
from services.engine.store.snapshots import SnapshotRecord
from services.engine.store.tx import Tx
from services.engine.traversal import begin_stack_action
from shared.errors import InvalidInput, NotFound
from shared.plugins import ResourceType

log = structlog.get_logger(__name__)

#: Longest snapshot name (Heat's column is 255 characters).
MAX_NAME = 255


class SnapshotNotFound(NotFound):
    """No such snapshot of this stack."""


class Snapshots:
    def __init__(
        self,
        *,
        store: Store,
        outbox: Outbox,
        operations: Operations,
        answers: Answers,
        types: Mapping[str, type[ResourceType]],
        per_stack: int = 32,
        ids: Ids = RANDOM_IDS,
    ) -> None:
        self._ids = ids  # a snapshot's id is its traversal's
        self._store = store
        self._outbox = outbox
        self._operations = operations
        self._answers = answers
        self._types = types
        self._per_stack = per_stack

    async def create(self, stack_id: StackId, name: str | None) -> dict[str, Any]:
        """Start a snapshot of the stack; its view (IN_PROGRESS, or COMPLETE at once when
        nothing needs a job)."""
        if name is not None and (not isinstance(name, str) or len(name) > MAX_NAME):
            raise InvalidInput(f"a snapshot name is a string of at most {MAX_NAME} characters", path="name")
        # A conflict (a deadlock with a transaction that holds some of the stack's rows)
        # runs it again, as the other operations do; a refusal is final.
        fx, ids, record, after = await retrying(lambda: self._start(stack_id, name))
        await self._outbox.publish(ids, fx.messages)
        log.info("snapshot_started", stack_id=str(stack_id), snapshot_id=str(record.snapshot_id))
        return snapshot_view(record, after)

    async def _start(
        self, stack_id: StackId, name: str | None
    ) -> tuple[Effects, list[int], SnapshotRecord, StackRow]:
        """One try of `create`: the snapshot's row and its traversal, committed."""
        fx = Effects()
        async with self._store.transaction() as tx:
            existing = await tx.claim_resources(stack_id)  # rows before the stack row, as checks do
            stack = await tx.stack(stack_id, lock=True)
            if stack is None:
                raise StackNotFound(f"stack {stack_id} not found")
            if stack.status is Status.IN_PROGRESS:
                raise Refused(f"Stack {stack.name} already has an action ({stack.action.value}) in progress.")
            if stack.current_template_id is None:
                raise Refused(f"stack {stack.name} has no template yet")
            if await tx.count_snapshots(stack_id) >= self._per_stack:
                raise InvalidInput(
                    f"You have reached the maximum snapshots per stack, {self._per_stack}. "
                    "Please delete some snapshots. (CONVERGE_MAX_SNAPSHOTS_PER_STACK)"
                )
            document = await self._document(tx, stack, existing)
            snapshot_id = await begin_stack_action(
                tx,
                stack,
                action=Action.SNAPSHOT,
                fx=fx,
                existing=existing,
                answers=self._answers,
                ids=self._ids,
            )
            await tx.insert_snapshot(snapshot_id, stack_id, name, document)
            after = await tx.stack(stack_id)
            if after is not None and after.status is Status.COMPLETE:  # nothing to snapshot: done
                await snapshot_ended(tx, stack_id, snapshot_id, Status.COMPLETE, "Stack SNAPSHOT completed")
            record = await tx.snapshot(stack_id, snapshot_id)
            ids = await fx.commit(tx)
        assert record is not None
        assert after is not None
        return fx, ids, record, after

    async def all(self, stack_id: StackId) -> list[dict[str, Any]]:
        async with self._store.transaction() as tx:
            stack = await self._stack(tx, stack_id)
            return [snapshot_view(s, stack) for s in await tx.snapshots(stack_id)]

    async def show(self, stack_id: StackId, snapshot_id: str) -> dict[str, Any]:
        async with self._store.transaction() as tx:
            stack = await self._stack(tx, stack_id)
            return snapshot_view(await self._snapshot(tx, stack, snapshot_id), stack)

    async def delete(self, stack_id: StackId, snapshot_id: str) -> None:
        async with self._store.transaction() as tx:
            stack = await self._stack(tx, stack_id)
            snapshot = await self._snapshot(tx, stack, snapshot_id)
            if snapshot_view(snapshot, stack)["status"] == IN_PROGRESS:
                raise InvalidInput("Deleting in-progress snapshot is not supported")
            await tx.delete_snapshot(stack_id, snapshot.snapshot_id)

    async def restore(self, stack_id: StackId, snapshot_id: str) -> None:
        """Converge the stack back to the snapshot (stack action RESTORE)."""
        async with self._store.transaction() as tx:
            stack = await self._stack(tx, stack_id)
            snapshot = await self._snapshot(tx, stack, snapshot_id)
        if snapshot_view(snapshot, stack)["status"] != COMPLETE:
            raise InvalidInput("Restoring incomplete snapshot is not supported")
        template, environment, parameters, files = restore_goal(snapshot.data, self._types)
        goal = Goal(template, environment, parameters, files)
        await self._operations.update(stack_id, goal, action=Action.RESTORE)

    async def export(self, stack_id: StackId) -> dict[str, Any]:
        """The stack's document, as abandon would give it, leaving the stack as it is."""
        async with self._store.transaction() as tx:
            stack = await self._stack(tx, stack_id)
            if stack.current_template_id is None:
                raise Refused(f"stack {stack.name} has no template yet")
            return await self._document(tx, stack, await tx.resources(stack_id))

    async def _document(self, tx: Tx, stack: StackRow, rows: list[ResourceRow]) -> dict[str, Any]:
        assert stack.current_template_id is not None
        record = await tx.template(stack.current_template_id)
        settings = await tx.stack_settings(stack.stack_id)
        assert record is not None
        assert settings is not None
        return stack_document(
            stack,
            template=record.template,
            environment=record.environment,
            files=record.files,
            parameters=record.parameters,
            tags=settings.tags,
            rows=rows,
            metadata=await tx.resources_metadata(stack.stack_id),
        )

    async def _stack(self, tx: Tx, stack_id: StackId) -> StackRow:
        stack = await tx.stack(stack_id)
        if stack is None:
            raise StackNotFound(f"stack {stack_id} not found")
        return stack

    async def _snapshot(self, tx: Tx, stack: StackRow, snapshot_id: str) -> SnapshotRecord:
        try:
            found = await tx.snapshot(stack.stack_id, uuid.UUID(snapshot_id))
        except ValueError:
            found = None
        if found is None:
            raise SnapshotNotFound(f"The Snapshot ({snapshot_id}) could not be found.")
        return found


def snapshot_view(snapshot: SnapshotRecord, stack: StackRow) -> dict[str, Any]:
    """Heat's shape of a snapshot."""
    status, reason = shown_status(snapshot.status, TraversalId(snapshot.snapshot_id), stack)
    return {
        "id": str(snapshot.snapshot_id),
        "name": snapshot.name,
        "action": "CREATE",
        "status": status,
        "status_reason": reason if reason is not None else snapshot.status_reason,
        "data": dict(snapshot.data),
        "creation_time": snapshot.created_at.isoformat(timespec="seconds").replace("+00:00", "Z"),
    }
