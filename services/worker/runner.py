"""Running one job: plugin lookup, property validation, the action, the result.

Where it sits: the worker's handler (`service.py`) decodes a `ResourceJob`
and calls `run_job`, which always returns a `JobResult` (complete, in
progress, failed with a reason a person can act on, or replacement needed);
the handler publishes it. Transient plugin errors are retried with backoff
until the job's deadline; the action as a whole is abandoned at the deadline.
Cancellation (worker shutting down) propagates: the job stays unacknowledged
and is delivered again, and the idempotency key keeps the rerun from
duplicating a real resource.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from shared.errors import PermanentError, TransientError
from shared.plugins import ActionContext, ActionResult, Outcome, Properties, ReplacementNeeded, ResourceType
from shared.plugins.retry import call_with_retry
from shared.protocol import JobAction, JobOutcome, JobResult, ResourceJob


@dataclass(frozen=True)
class RunnerDeps:
    """What running a job needs from the outside, injected."""

    types: Mapping[str, type[ResourceType]]
    http: Any = None  # shared.http_client.HttpGateway
    api_url: str = ""
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    random: Callable[[], float] = field(default=random.random)


def _result(job: ResourceJob, outcome: JobOutcome, **fields: Any) -> JobResult:
    return JobResult(
        id=f"{job.job_id}:result",
        job_id=job.job_id,
        stack_id=job.stack_id,
        traversal_id=job.traversal_id,
        resource_id=job.resource_id,
        resource_name=job.resource_name,
        action=job.action,
        outcome=outcome,
        **fields,
    )


def _failed(job: ResourceJob, reason: str) -> JobResult:
    return _result(job, JobOutcome.FAILED, physical_id=job.physical_id, reason=reason)


def _validate(schema: type[Properties], values: Mapping[str, Any], what: str) -> Properties:
    try:
        return schema.model_validate(dict(values))
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise PermanentError(f"{what}.{where}: {err['msg']}" if where else f"{what}: {err['msg']}") from exc


async def _act(plugin: ResourceType, job: ResourceJob, ctx: ActionContext) -> ActionResult:
    schema = type(plugin).properties
    props = _validate(schema, job.properties, "properties")
    if job.action is JobAction.CREATE:
        return await plugin.create(ctx, props)
    if job.physical_id is None:
        # Never created (or creation never reported an id): nothing to change or delete.
        if job.action is JobAction.DELETE:
            return ActionResult(physical_id=None)
        raise PermanentError("cannot update a resource that has no physical id")
    if job.action is JobAction.UPDATE:
        old = _validate(schema, job.previous_properties or {}, "previous properties")
        return await plugin.update(ctx, job.physical_id, old, props)
    return await plugin.delete(ctx, job.physical_id, props)


async def run_job(job: ResourceJob, *, deps: RunnerDeps, log: Any) -> JobResult:
    cls = deps.types.get(job.resource_type)
    if cls is None:
        return _failed(job, f"unknown resource type {job.resource_type!r}")
    remaining = job.deadline - deps.clock()
    if remaining <= 0:
        return _failed(job, f"Resource {job.action.upper()} timed out before it started")
    ctx = ActionContext(
        stack_id=job.stack_id,
        stack_name=job.stack_name,
        project_id=job.project_id,
        resource_name=job.resource_name,
        idempotency_key=job.job_id,
        deadline=job.deadline,
        cancelled=asyncio.Event(),
        log=log,
        http=deps.http,
        api_url=deps.api_url,
        clock=deps.clock,
    )
    plugin = cls()
    try:
        async with asyncio.timeout(remaining):
            result = await call_with_retry(
                lambda: _act(plugin, job, ctx),
                deadline=job.deadline,
                clock=deps.clock,
                sleep=deps.sleep,
                random=deps.random,
                log=log,
            )
    except ReplacementNeeded as exc:
        return _result(job, JobOutcome.REPLACE, physical_id=job.physical_id, reason=str(exc))
    except TimeoutError:
        ctx.cancelled.set()
        return _failed(job, f"Resource {job.action.upper()} timed out after {remaining:.0f}s")
    except TransientError as exc:
        return _failed(job, f"Resource {job.action.upper()} failed after retries: {exc}")
    except PermanentError as exc:
        return _failed(job, f"Resource {job.action.upper()} failed: {exc}")
    except Exception as exc:  # third-party plugin code is a boundary: report, don't crash-loop
        log.exception("plugin_error", error=repr(exc))
        return _failed(job, f"Resource {job.action.upper()} failed: plugin error {type(exc).__name__}: {exc}")
    outcome = JobOutcome.IN_PROGRESS if result.outcome is Outcome.IN_PROGRESS else JobOutcome.COMPLETE
    physical_id = result.physical_id if result.physical_id is not None else job.physical_id
    if job.action is JobAction.DELETE and outcome is JobOutcome.COMPLETE:
        physical_id = job.physical_id
    return _result(job, outcome, physical_id=physical_id, attributes=dict(result.attributes))
