"""Looking at resources: finish asynchronous actions, and observe for drift.

Where it sits: the engine sends an `ObserveRequest` when a worker reported
"in progress"; one observer takes it (the queue gives each request to one
consumer, and to another if that one dies), `watch` polls the plugin's
`observe` with growing pauses (or when the plugin says looking again is worth
it) until the resource is ready, failed or gone, or the job's deadline
passes, and returns the job's final outcome. For a stack
under observation the engine sends `ObserveResource`; `look` observes the
resource once and returns what it saw, for the engine to judge drift.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.errors import PermanentError, TransientError
from shared.plugins import Observation, ObservedState, ResourceType
from shared.plugins.retry import call_with_retry
from shared.plugins.runtime import PluginRuntime, action_context, validate_properties
from shared.protocol import (
    JobAction,
    JobOutcome,
    JobResult,
    ObserveRequest,
    ObserveResource,
    ResourceJob,
    ResourceObserved,
)


@dataclass(frozen=True)
class PollPolicy:
    """Pauses between observations, in seconds: first, growth factor, cap; a
    plugin's own `retry_after` is followed instead, within `floor` and `cap`."""

    first: float = 0.1
    factor: float = 1.5
    cap: float = 5.0
    floor: float = 0.005

    def after(self, observation: Observation, pause: float) -> tuple[float, float]:
        """(how long to wait now, the next guessed pause). Pure."""
        if observation.retry_after is not None:
            return min(self.cap, max(self.floor, observation.retry_after)), pause
        return pause, min(self.cap, pause * self.factor)


DEFAULT_POLL = PollPolicy()


def settle(action: JobAction, observation: Observation) -> tuple[JobOutcome, str] | None:
    """The job's outcome once `observation` is final; None while still in progress. Pure."""
    state = observation.state
    if state is ObservedState.IN_PROGRESS:
        return None
    if state is ObservedState.FAILED:
        return JobOutcome.FAILED, observation.reason or "the resource went into an error state"
    if action is JobAction.DELETE:
        return (JobOutcome.COMPLETE, "") if state is ObservedState.GONE else None
    if state is ObservedState.GONE:
        return JobOutcome.FAILED, "the resource disappeared while being built"
    return JobOutcome.COMPLETE, ""


def _result(job: ResourceJob, outcome: JobOutcome, observation: Observation | None, reason: str) -> JobResult:
    attributes = dict(observation.attributes) if observation is not None else {}
    physical_id = job.physical_id
    if observation is not None and observation.physical_id is not None:
        physical_id = observation.physical_id  # the id once the action is over (the plugin's)
    return JobResult.for_job(
        job, outcome, reporter="observed", physical_id=physical_id, attributes=attributes, reason=reason
    )


async def watch(
    request: ObserveRequest, *, runtime: PluginRuntime, log: Any, policy: PollPolicy = DEFAULT_POLL
) -> JobResult:
    job = request.job
    heat_action = job.action.value.upper()
    cls: type[ResourceType] | None = runtime.types.get(job.resource_type)
    if cls is None:
        return _result(job, JobOutcome.FAILED, None, f"unknown resource type {job.resource_type!r}")
    if job.physical_id is None:
        return _result(job, JobOutcome.FAILED, None, f"Resource {heat_action} failed: no physical id")
    physical_id = job.physical_id
    try:
        props = validate_properties(cls.properties, job.properties, "properties")
    except PermanentError as exc:
        return _result(job, JobOutcome.FAILED, None, f"Resource {heat_action} failed: {exc}")
    ctx = action_context(job, runtime, log)
    plugin = cls()
    pause = policy.first
    while True:
        try:
            observation = await _observe(plugin, ctx, job, physical_id, props, runtime=runtime, log=log)
        except (TransientError, PermanentError) as exc:
            return _result(job, JobOutcome.FAILED, None, f"Resource {heat_action} failed: {exc}")
        settled = settle(job.action, observation)
        if settled is not None:
            outcome, reason = settled
            if reason:
                reason = f"Resource {heat_action} failed: {reason}"
            return _result(job, outcome, observation, reason)
        wait, pause = policy.after(observation, pause)
        if runtime.clock() + wait >= job.deadline:
            return _result(job, JobOutcome.FAILED, observation, f"Resource {heat_action} timed out")
        await runtime.sleep(wait)


async def look(request: ObserveResource, *, runtime: PluginRuntime, log: Any) -> ResourceObserved | None:
    """Observe the resource once; None when it cannot be observed now (an unknown type,
    or the provider keeps failing): not knowing is not drift."""
    job = request.job
    cls = runtime.types.get(job.resource_type)
    if cls is None or job.physical_id is None:
        log.warning("cannot_observe", reason="unknown type or no physical id")
        return None
    physical_id = job.physical_id
    plugin = cls()
    ctx = action_context(job, runtime, log)
    try:
        props = validate_properties(cls.properties, job.properties, "properties")
        observation = await _observe(plugin, ctx, job, physical_id, props, runtime=runtime, log=log)
    except (TransientError, PermanentError) as exc:
        log.warning("cannot_observe", reason=str(exc))
        return None
    return ResourceObserved.of(request, observation)


async def _observe(
    plugin: ResourceType,
    ctx: Any,
    job: ResourceJob,
    physical_id: str,
    props: Any,
    *,
    runtime: PluginRuntime,
    log: Any,
) -> Observation:
    """One `observe` call, retried on transient errors until the job's deadline."""
    return await call_with_retry(
        lambda: plugin.observe(ctx, physical_id, props),
        deadline=job.deadline,
        clock=runtime.clock,
        sleep=runtime.sleep,
        random=runtime.random,
        log=log,
    )
