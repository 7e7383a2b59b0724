"""Issuing a job: recorded on its row and queued in the same transaction.

Where it sits: a node check (`checks`) or a replacement (`replacement`) that
decided to create, update, delete or run a stack action on a resource calls
`issue` with the node's `Check` and the `core.node_checks.JobOrder` decided:
the row takes the job (compare-and-swap: its id, its node, what it applies,
as `core.node_checks.issued` says), and the job goes where it runs: a nested
stack's to the engine queue (an operation of the child stack,
`nested.children`), a config resource's is run here (`configs`: the engine
stores the config), every other to the workers. `job_in_flight` is the job on a row again, as an
observer needs it when the job reported IN_PROGRESS (`results`).
"""

from __future__ import annotations

from services.engine.configs import is_config_type, run_config_job
from services.engine.convergence.shell import Check, update_row
from services.engine.core.model import ResourceRow, StackRow
from services.engine.core.nesting import is_nested
from services.engine.core.node_checks import JobOrder, issued
from services.engine.jobs import job_for
from services.engine.nested.messages import NestedStackJob
from shared.protocol import ENGINE_QUEUE, JOBS_QUEUE, JobAction, ResourceJob


async def issue(at: Check, order: JobOrder) -> None:
    """Record the job on the checked row (compare-and-swap, with the order's own row
    changes) and queue it, in one transaction."""
    stack, row, fx, deps = at.stack, at.row, at.fx, at.shell.deps
    job_id = deps.ids.job()
    issuing = issued(stack, at.traversal, at.node, row, order, job_id)
    type_name = issuing.type_name
    job = job_for(
        stack,
        row,
        job_id=job_id,
        traversal=at.traversal,
        action=order.action,
        type_name=type_name,
        physical_id=row.physical_id,
        properties=order.properties,
        now=deps.clock(),
        previous=row.properties,
    )
    await update_row(at.tx, row, issuing.changes)
    fx.issued_for(stack.stack_id, at.traversal)  # confirmed still the stack's at the commit
    e = issuing.event
    fx.event(stack.stack_id, row.name, e.physical_id, e.type_name, e.action, e.status.value, e.reason)
    if is_nested(type_name):  # run by an engine, as an operation of the child stack
        nested = NestedStackJob(
            job_id=job_id, stack_id=stack.stack_id, resource_id=row.resource_id, action=order.action
        )
        fx.emit(ENGINE_QUEUE, nested)
    elif is_config_type(type_name):  # the engine stores the config, in this transaction
        result = await run_config_job(
            at.tx, job, deps.types, max_bytes=deps.config_bytes, api_url=deps.api_url
        )
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
