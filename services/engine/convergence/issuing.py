"""Issuing a job: recorded on its row and queued in the same transaction.

Where it sits: a node check (`checks`) or a replacement (`replacement`) that
decided to create, update, delete or run a stack action on a resource calls
`issue`: the row takes the job (compare-and-swap: its id, its node, what it
applies), and the job goes where it runs: a nested stack's to the engine
queue (an operation of the child stack, `nested.children`), a config
resource's is run here (`configs`: the engine stores the config), every
other to the workers. `job_in_flight` is the job on a row again, as an
observer needs it when the job reported IN_PROGRESS (`results`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.engine.configs import is_config_type, run_config_job
from services.engine.convergence.shell import Shell, update_row
from services.engine.core.model import Action, Node, ResourceId, ResourceRow, StackRow, Status, TraversalId
from services.engine.core.nesting import is_nested
from services.engine.core.row_change import NO_CHANGE, ResourceChange, set_or
from services.engine.effects import Effects
from services.engine.jobs import job_for
from services.engine.nested.messages import NestedStackJob
from services.engine.store.tx import Tx
from shared.protocol import ENGINE_QUEUE, JOBS_QUEUE, JobAction, ResourceJob


async def issue(
    shell: Shell,
    tx: Tx,
    stack: StackRow,
    traversal: TraversalId,
    node: Node,
    row: ResourceRow,
    action: JobAction,
    properties: Mapping[str, Any],
    requires: frozenset[ResourceId],
    fx: Effects,
    *,
    change: ResourceChange = NO_CHANGE,
) -> None:
    """Record the job on the row (compare-and-swap, with any other `change`) and queue
    it, in one transaction."""
    job_id = shell.ids.job()
    type_name = set_or(change.type, row.type)
    job = job_for(
        stack,
        row,
        job_id=job_id,
        traversal=traversal,
        action=action,
        type_name=type_name,
        physical_id=row.physical_id,
        properties=properties,
        now=shell.clock(),
        previous=row.properties,
    )
    heat_action = Action(action.value.upper())
    issued = ResourceChange(
        action=heat_action,
        status=Status.IN_PROGRESS,
        status_reason="",
        current_job=job_id,
        job_node=node,
        job_properties=dict(properties),
        job_requires=requires,
        job_template_id=stack.current_template_id,
        traversal_id=traversal,
    )
    await update_row(tx, row, issued | change)
    fx.event(
        stack.stack_id, row.name, row.physical_id, type_name, heat_action, "IN_PROGRESS", "state changed"
    )
    if is_nested(type_name):  # run by an engine, as an operation of the child stack
        nested = NestedStackJob(
            job_id=job_id, stack_id=stack.stack_id, resource_id=row.resource_id, action=action
        )
        fx.emit(ENGINE_QUEUE, nested)
    elif is_config_type(type_name):  # the engine stores the config, in this transaction
        result = await run_config_job(tx, job, shell.types, max_bytes=shell.config_bytes)
        if result is not None:  # None: a deployment waits for its server's signal
            fx.emit(ENGINE_QUEUE, result)
    else:
        fx.emit(JOBS_QUEUE, job)


def job_in_flight(
    stack: StackRow | None, row: ResourceRow, action: JobAction, physical_id: str | None, *, now: float
) -> ResourceJob:
    """The job in flight on `row`, as an observer needs it (asked at `now`)."""
    assert row.current_job is not None
    assert row.traversal_id is not None
    return job_for(
        stack,
        row,
        job_id=row.current_job,
        traversal=row.traversal_id,
        action=action,
        type_name=row.type,
        physical_id=physical_id,
        properties=row.job_properties or {},
        now=now,
    )
