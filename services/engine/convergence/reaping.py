"""Reaping orphans: what a job nobody waits for any more created is deleted.

Where it sits: a job result whose row is gone or runs another job now
(`results`: a stale result, e.g. a create job replayed late by a relay after
its resource was deleted) comes here. A create that made a real resource no
row owns would leak: a delete job for it is queued (or, for a config
resource, the config is deleted here, `configs.reap_config`). A child stack
is never an orphan: it is made with its row's physical id.
"""

from __future__ import annotations

import uuid

import structlog

from services.engine.configs import is_config_type, reap_config
from services.engine.convergence.shell import Shell
from services.engine.core.model import StackId
from services.engine.core.nesting import is_nested
from services.engine.effects import Effects
from services.engine.jobs import deadline_for
from services.engine.store.tx import Tx
from shared.protocol import JOBS_QUEUE, JobAction, JobOutcome, JobResult

log = structlog.get_logger(__name__)


async def reap_orphan(shell: Shell, tx: Tx, res: JobResult, fx: Effects) -> None:
    """A job nobody waits for any more created a real resource (a late redelivery):
    unless a row owns that resource, delete it, so nothing leaks."""
    created = res.action is JobAction.CREATE and res.outcome in (
        JobOutcome.COMPLETE,
        JobOutcome.IN_PROGRESS,
    )
    if not created or res.physical_id is None or not res.resource_type or is_nested(res.resource_type):
        return  # (a child stack always belongs to a row: it is made with the row's physical id)
    if await tx.resource_by_physical_id(StackId(uuid.UUID(res.stack_id)), res.physical_id) is not None:
        return  # an idempotent replay of a resource a row owns
    log.warning("orphan_reaped", physical_id=res.physical_id, resource=res.resource_name)
    if is_config_type(res.resource_type):
        await reap_config(tx, res)
        return
    fx.emit(
        JOBS_QUEUE, res.undo(job_id=shell.deps.ids.job(), deadline=deadline_for(None, now=shell.deps.clock()))
    )
