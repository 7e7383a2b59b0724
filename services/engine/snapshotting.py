"""The ends of snapshot work inside the check path (async shell, in the caller's transaction).

Where it sits: `convergence.results` calls `job_ended` when a resource's job
returns what its own snapshot kept; `nested.answer.Answers.stack_ended`,
which every end of a stack operation passes through, calls `snapshot_ended`
when a SNAPSHOT action ends. Kept apart from `snapshots` (the API's shell) so
the check path does not import the operations it is started by.
"""

from __future__ import annotations

import json
import uuid

import structlog

from services.engine.core.model import ResourceRow, StackId, Status
from services.engine.core.snapshots import with_resource_data
from services.engine.effects import Effects
from services.engine.store.tx import Tx
from shared.plugins import ResourceType
from shared.protocol import JobAction, JobOutcome, JobResult

log = structlog.get_logger(__name__)

#: How much of a snapshot taken before a deletion its event shows.
EVENT_CHARS = 1000


async def snapshot_ended(
    tx: Tx, stack_id: StackId, snapshot_id: uuid.UUID | None, status: Status, reason: str
) -> None:
    """The SNAPSHOT action `snapshot_id` ended: the snapshot is COMPLETE (or FAILED),
    with what each resource's own snapshot kept."""
    if snapshot_id is None:
        return
    snapshot = await tx.in_progress_snapshot(snapshot_id)
    if snapshot is None or snapshot.stack_id != stack_id:
        return  # ended already (or not a snapshot's action)
    document = with_resource_data(snapshot.data, await tx.resource_snapshots(snapshot_id))
    await tx.end_snapshot(snapshot_id, status.value, reason, document)
    log.info("snapshot_ended", stack_id=str(stack_id), snapshot_id=str(snapshot_id), status=status.value)


async def job_ended(tx: Tx, row: ResourceRow, result: JobResult, fx: Effects) -> None:
    """Keep what a resource's own snapshot returned: a stack snapshot's part, or the
    snapshot taken before a deletion (deletion_policy Snapshot), shown in an event."""
    if result.snapshot is None or result.outcome is not JobOutcome.COMPLETE:
        return
    if result.action is JobAction.SNAPSHOT and row.traversal_id is not None:
        await tx.keep_resource_snapshot(row.traversal_id, row.name, result.snapshot)
    elif result.action is JobAction.DELETE:
        text = json.dumps(result.snapshot, separators=(",", ":"))
        text = text if len(text) <= EVENT_CHARS else text[: EVENT_CHARS - 3] + "..."
        reason = f"Snapshot taken before deletion (deletion_policy: Snapshot): {text}"
        fx.event(row.stack_id, row.name, row.physical_id, row.type, "SNAPSHOT", "COMPLETE", reason)


def takes_snapshots(cls: type[ResourceType] | None) -> bool:
    """Whether resources of type `cls` get a job in a SNAPSHOT action (their own snapshot)."""
    return cls is not None and cls.supports_snapshot
