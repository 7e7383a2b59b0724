"""The messages services exchange about resources (queues and kinds).

    engine --ResourceJob--> `jobs` --> worker --JobResult--> job.reply_to (engine)
    engine --ObserveRequest--> `observe` --> observer --JobResult--> (engine)

An action that returns "in progress" (a server still building) is finished
by an observer: it polls the plugin's `observe` until the resource settles
and reports the job's final outcome as a `JobResult`, exactly as a worker
would have.

A job's `job_id` is its idempotency key: stable across redeliveries of the
same job, new for every new action (a re-create after drift gets a new one).
A result's id is derived from the job id, so the engine's inbox drops a
duplicate result of a redelivered job; a settled result's id also names the
physical resource (`result_id`), so a replay that made a *different*
resource (the same job delivered again after its resource was deleted)
reaches the engine, which reaps what nobody owns.
"""

from __future__ import annotations

import hashlib
from enum import StrEnum
from typing import Any

from pydantic import Field

from shared.messages import Message
from shared.plugins.base import Observation, ObservedState

JOBS_QUEUE = "jobs"
ENGINE_QUEUE = "engine"
OBSERVE_QUEUE = "observe"
#: Queues whose messages, when published together, travel in bundles (`shared.bus.bundles`,
#: on RabbitMQ): the jobs an engine's batch issues. A worker takes the jobs it has free
#: handlers for and passes the others on. What an engine sends its own queue (checks, a
#: child stack's operation) goes message by message, to spread over the engines; handlers'
#: replies (a worker's results, an observer's reports) go in bundles whatever their queue.
BUNDLED_QUEUES = frozenset({JOBS_QUEUE})


class JobAction(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    CHECK = "check"  # observe the resource: does it exist and is it healthy?
    SUSPEND = "suspend"
    RESUME = "resume"
    SNAPSHOT = "snapshot"  # keep a copy (types that support snapshots), for a stack snapshot


class JobOutcome(StrEnum):
    COMPLETE = "complete"
    IN_PROGRESS = "in_progress"  # asynchronous: an observer reports the end
    FAILED = "failed"
    REPLACE = "replace"  # update cannot be in place: the engine replaces the resource
    GONE = "gone"  # a check found the resource no longer exists: the engine records it missing


class ResourceJob(Message):
    """Run one plugin action against the outside world."""

    kind = "resource.job"

    job_id: str = Field(min_length=1, max_length=60)
    stack_id: str
    stack_name: str
    project_id: str
    traversal_id: str
    resource_id: int
    resource_name: str
    resource_type: str
    action: JobAction
    physical_id: str | None = None
    properties: dict[str, Any] = Field(default_factory=dict)
    previous_properties: dict[str, Any] | None = None
    deadline: float = Field(description="time.time() instant after which the action is abandoned")
    reply_to: str = ENGINE_QUEUE
    # A delete of a resource whose deletion_policy is Snapshot: its snapshot is taken first.
    snapshot_first: bool = False


class JobResult(Message):
    """What a job achieved."""

    kind = "resource.result"

    job_id: str
    stack_id: str
    traversal_id: str
    resource_id: int
    resource_name: str
    action: JobAction
    outcome: JobOutcome
    physical_id: str | None = None
    attributes: dict[str, Any] = Field(default_factory=dict)
    reason: str = ""
    # What the job acted on, so the engine can undo the action of a job it no
    # longer expected (a late redelivery that re-created a deleted resource).
    resource_type: str = ""
    properties: dict[str, Any] = Field(default_factory=dict)
    stack_name: str = ""
    project_id: str = ""
    snapshot: dict[str, Any] | None = None  # what a snapshot kept (snapshot, or delete after one)

    def undo(self, *, job_id: str, deadline: float) -> ResourceJob:
        """A job deleting what this result's job created (an orphan nobody owns)."""
        return ResourceJob(
            job_id=job_id,
            stack_id=self.stack_id,
            stack_name=self.stack_name,
            project_id=self.project_id,
            traversal_id=self.traversal_id,
            resource_id=self.resource_id,
            resource_name=self.resource_name,
            resource_type=self.resource_type,
            action=JobAction.DELETE,
            physical_id=self.physical_id,
            properties=self.properties,
            deadline=deadline,
        )

    @classmethod
    def for_job(cls, job: ResourceJob, outcome: JobOutcome, *, reporter: str, **fields: Any) -> JobResult:
        """The outcome of `job`, its id made by `result_id`."""
        return cls(
            id=result_id(job.job_id, reporter, outcome, fields.get("physical_id")),
            job_id=job.job_id,
            stack_id=job.stack_id,
            traversal_id=job.traversal_id,
            resource_id=job.resource_id,
            resource_name=job.resource_name,
            action=job.action,
            outcome=outcome,
            resource_type=job.resource_type,
            properties=job.properties,
            stack_name=job.stack_name,
            project_id=job.project_id,
            **fields,
        )


def result_id(job_id: str, reporter: str, outcome: JobOutcome, physical_id: str | None) -> str:
    """`<job_id>:<reporter>` ("result" from a worker, "observed" from an observer),
    so a duplicate result of a redelivered job dedupes in the engine's inbox.

    A settled result (complete or failed) with a physical id adds a digest of
    it: a redelivery that found the same resource (the plugin honoured the
    idempotency key) still dedupes, but one that made another resource is a
    different fact the engine must see, or that resource would leak. An
    in-progress result keeps the plain id: a plugin may encode its progress in
    the physical id, which must not make one action look like two.
    """
    base = f"{job_id}:{reporter}"
    if outcome is JobOutcome.IN_PROGRESS or physical_id is None:
        return base
    return f"{base}:{hashlib.sha256(physical_id.encode()).hexdigest()[:12]}"


class ObserveRequest(Message):
    """Watch the resource of `job` (whose action is in progress) until it settles."""

    kind = "resource.observe"

    job: ResourceJob


class ObserveResource(Message):
    """Look at a settled resource once, for drift (a stack under observation).

    `job` (action `check`) names the resource and carries the properties the
    engine last applied, as the plugin's `observe` needs them; `cycle` is the
    observation round of the stack. With `gate_node` (and `gate_traversal`) the
    look is an update's (`converge: true`): that node's check waits for the
    answer, so one is always sent, even when the resource cannot be observed.
    """

    kind = "resource.look"

    job: ResourceJob
    cycle: int
    gate_traversal: str | None = None
    gate_node: int | None = None


class ResourceObserved(Message):
    """What an observer saw of a resource (answer to `ObserveResource`)."""

    kind = "resource.seen"

    stack_id: str
    resource_id: int
    physical_id: str
    cycle: int
    state: ObservedState
    reason: str = ""
    attributes: dict[str, Any] = Field(default_factory=dict)
    properties: dict[str, Any] | None = None  # actual values, where the provider exposes them
    expected: dict[str, Any] = Field(default_factory=dict)  # what the request said was applied
    gate_traversal: str | None = None  # the look's, when a node's check waits for it
    gate_node: int | None = None

    @classmethod
    def of(cls, request: ObserveResource, observation: Observation) -> ResourceObserved:
        job = request.job
        assert job.physical_id is not None
        return cls(
            id=f"{job.job_id}:seen",
            stack_id=job.stack_id,
            resource_id=job.resource_id,
            physical_id=job.physical_id,
            cycle=request.cycle,
            state=observation.state,
            reason=observation.reason,
            attributes=dict(observation.attributes),
            properties=dict(observation.properties) if observation.properties is not None else None,
            expected=job.properties,
            gate_traversal=request.gate_traversal,
            gate_node=request.gate_node,
        )

    @classmethod
    def unobserved(cls, request: ObserveResource) -> ResourceObserved:
        """The answer to a gate's look at a resource that could not be observed: nothing
        is known of it, so nothing counts as changed (the node's check goes on)."""
        return cls.of(request, Observation(ObservedState.READY, reason="could not be observed"))


class ResourceChanged(Message):
    """A provider notified a change of the resource `physical_id` (observer -> engine):
    if a stack under observation holds it, the engine has it looked at now."""

    kind = "resource.changed"

    provider: str
    physical_id: str
