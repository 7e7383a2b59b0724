"""Running one job: plugin lookup, property validation, the action, the result.

Where it sits: the worker's handler (`service.py`) decodes a `ResourceJob`
and calls `run_job`, which always returns a `JobResult` (complete, in
progress, failed with a reason a person can act on, replacement needed, or
gone); the handler publishes it. A plugin's `ResourceGone` means what the
action makes of it (`gone_outcome`): an update replaces (creates anew), a
delete is done, a check reports the resource gone, anything else fails.
A snapshot job returns what the plugin kept (`JobResult.snapshot`); a delete
with `snapshot_first` (deletion_policy Snapshot) takes the snapshot first.
Transient plugin errors are retried with backoff until the job's deadline;
the action as a whole is abandoned at the deadline.
Cancellation (worker shutting down) propagates: the job stays unacknowledged
and is delivered again, and the idempotency key keeps the rerun from
duplicating a real resource.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from shared.errors import PermanentError, TransientError
from shared.plugins import (
    ActionContext,
    ActionResult,
    ObservedState,
    Outcome,
    Properties,
    ReplacementNeeded,
    ResourceGone,
    ResourceType,
)
from shared.plugins.retry import call_with_retry
from shared.plugins.runtime import PluginRuntime, action_context, validate_properties
from shared.protocol import JobAction, JobOutcome, JobResult, ResourceJob


def _result(job: ResourceJob, outcome: JobOutcome, **fields: Any) -> JobResult:
    return JobResult.for_job(job, outcome, reporter="result", **fields)


def _failed(job: ResourceJob, reason: str) -> JobResult:
    return _result(job, JobOutcome.FAILED, physical_id=job.physical_id, reason=reason)


def gone_outcome(action: JobAction) -> JobOutcome:
    """What a resource found gone means for `action`. Pure."""
    return {
        JobAction.UPDATE: JobOutcome.REPLACE,
        JobAction.DELETE: JobOutcome.COMPLETE,
        JobAction.CHECK: JobOutcome.GONE,
    }.get(action, JobOutcome.FAILED)


async def _act(plugin: ResourceType, job: ResourceJob, ctx: ActionContext) -> ActionResult:
    if job.physical_id is None and job.action is JobAction.DELETE:
        # Never created (or creation never reported an id): nothing to delete.
        return ActionResult(physical_id=None)
    schema = type(plugin).properties
    props = validate_properties(schema, job.properties, "properties")
    if job.action is JobAction.CREATE:
        return await plugin.create(ctx, props)
    if job.physical_id is None:
        raise PermanentError(f"cannot {job.action.value} a resource that has no physical id")
    if job.action is JobAction.UPDATE:
        old = validate_properties(schema, job.previous_properties or {}, "previous properties")
        return await plugin.update(ctx, job.physical_id, old, props)
    if job.action is JobAction.CHECK:
        return await _check(plugin, ctx, job.physical_id, props)
    if job.action is JobAction.SUSPEND:
        return await plugin.suspend(ctx, job.physical_id, props)
    if job.action is JobAction.RESUME:
        return await plugin.resume(ctx, job.physical_id, props)
    if job.action is JobAction.SNAPSHOT:
        kept = await plugin.snapshot(ctx, job.physical_id, props)
        return ActionResult(physical_id=job.physical_id, snapshot=kept)
    if job.snapshot_first:  # deletion_policy Snapshot: keep a copy, then delete
        kept = await plugin.snapshot(ctx, job.physical_id, props)
        deleted = await plugin.delete(ctx, job.physical_id, props)
        return dataclasses.replace(deleted, snapshot=kept)
    return await plugin.delete(ctx, job.physical_id, props)


async def _check(
    plugin: ResourceType, ctx: ActionContext, physical_id: str, props: Properties
) -> ActionResult:
    """A stack check: the resource must exist and be healthy now; its attributes are refreshed."""
    observed = await plugin.observe(ctx, physical_id, props)
    if observed.state is ObservedState.READY:
        return ActionResult(physical_id=physical_id, attributes=observed.attributes)
    detail = f": {observed.reason}" if observed.reason else ""
    if observed.state is ObservedState.GONE:
        raise ResourceGone(f"the resource no longer exists{detail}")
    what = {
        ObservedState.FAILED: "the resource is in an error state",
        ObservedState.IN_PROGRESS: "the resource is not ready",
    }[observed.state]
    raise PermanentError(f"{what}{detail}")


async def run_job(job: ResourceJob, *, deps: PluginRuntime, log: Any) -> JobResult:
    cls = deps.types.get(job.resource_type)
    if cls is None:
        return _failed(job, f"unknown resource type {job.resource_type!r}")
    remaining = job.deadline - deps.clock()
    if remaining <= 0:
        return _failed(job, f"Resource {job.action.upper()} timed out before it started")
    ctx = action_context(job, deps, log)
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
    except ResourceGone as exc:
        outcome = gone_outcome(job.action)
        if outcome is JobOutcome.FAILED:
            return _failed(job, f"Resource {job.action.upper()} failed: {exc}")
        reason = "" if outcome is JobOutcome.COMPLETE else str(exc)
        return _result(job, outcome, physical_id=job.physical_id, reason=reason)
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
    kept = dict(result.snapshot) if result.snapshot is not None else None
    return _result(job, outcome, physical_id=physical_id, attributes=dict(result.attributes), snapshot=kept)
