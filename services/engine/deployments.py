"""The deployment resource types' jobs and the agent's signals, run by the engine.

Where it sits: `convergence.issuing` issues a job for an OS::Heat::SoftwareDeployment
or StructuredDeployment like any job, and `configs.run_config_job` hands it
here, in the transaction that issues it (the engine is the only writer of
`software_deployments`):

- create / update (and delete, suspend, resume when `actions` names them): the
  source config (property `config`) and the inputs give a derived config
  (`shared.plugins.builtin.software_deployment.derived_config`; with
  TEMP_URL_SIGNAL it carries a fresh signal URL, `deployment_urls`), written to
  `software_configs`; the deployment row points at it, IN_PROGRESS with that
  action, and the job waits: no result is sent until the server's agent
  signals (`signalled`). NO_SIGNAL, or a create or update not in `actions`,
  completes at once (a suspend or resume not in `actions` delivers nothing).
  The ids are made from the job id, so a job run twice writes one deployment
  and one derived config; a second delete (suspend, resume) job finding the
  same action still waiting takes over the wait. A delivery replaces the
  derived config (the old one is deleted) and keeps the deployment's id.
- delete: with DELETE delivered, a signalled success removes the deployment and
  its derived config (`signalled`); a failure keeps them (the resource is
  DELETE_FAILED) and the next delete removes them at once. Without DELETE in
  `actions`, or with NO_SIGNAL, they go at once. check: the deployment must
  still exist.

A signal (a resource signal, or `PUT /software_deployments/{id}` with a final
status) records the outputs and status on the deployment, and when the
deployment belongs to a resource whose job waits for it, sends that job's
`JobResult` through the outbox (`<job>:signalled`, so a repeated signal is one
result). The recovery never sends a deployment job again: either it is
waiting for the agent, or its result left with the transaction that ran it.
A deployment waits for its signal at most CONVERGE_DEPLOYMENT_WAIT_SECONDS (and no
longer than its stack's timeout): the recovery sweep fails it after that
(`wait_expired`), so no stack waits for a silent server for ever.
"""

from __future__ import annotations

import hmac
import uuid
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from services.engine.core.model import Action, ResourceRow, StackId, StackRow, Status
from services.engine.core.row_change import ResourceChange
from services.engine.deployment_urls import new_token, signal_url
from services.engine.effects import Effects
from services.engine.store.software_records import DeploymentChange, DeploymentRecord
from services.engine.store.tx import Tx
from shared.errors import ConflictError, NotFound, PermanentError
from shared.plugins import ResourceType
from shared.plugins.builtin.software_deployment import (
    DEPLOYMENT_TYPES,
    HEAT_SIGNAL,
    NO_SIGNAL,
    STANDARD_OUTPUTS,
    TEMP_URL_SIGNAL,
    DeployContext,
    SignalOutcome,
    SoftwareDeploymentProperties,
    derived_config,
    signal_outcome,
)
from shared.plugins.runtime import validate_properties
from shared.protocol import ENGINE_QUEUE, JobAction, JobOutcome, JobResult, ResourceJob

IN_PROGRESS, COMPLETE, FAILED = "IN_PROGRESS", "COMPLETE", "FAILED"
#: How long a deployment waits for its server's signal by default (CONVERGE_DEPLOYMENT_WAIT_SECONDS).
WAIT_SECONDS = 3600.0
#: The engine API's public base by default (CONVERGE_PUBLIC_API_URL; TEMP_URL_SIGNAL's URLs).
DEFAULT_API_URL = "http://127.0.0.1:8004"


def is_deployment_type(type_name: str) -> bool:
    return type_name in DEPLOYMENT_TYPES


#: Stack operations whose check does not wait for a deployment's signal: its new job
#: preempts the wait (a stack delete or rollback must not hang on a silent server).
PREEMPTING_ACTIONS = frozenset({Action.DELETE, Action.ROLLBACK})


def preempted(stack: StackRow, row: ResourceRow) -> bool:
    """Whether a check of `stack`'s current operation takes `row` from the deployment job
    waiting on it (instead of waiting for that job's outcome)."""
    return row.type in DEPLOYMENT_TYPES and stack.action in PREEMPTING_ACTIONS


def deployment_id_of(job_id: str) -> uuid.UUID:
    """The deployment a create job makes: the same on every run of the job."""
    return uuid.uuid5(uuid.NAMESPACE_OID, f"converge-software-deployment:{job_id}")


def derived_config_id_of(job_id: str) -> uuid.UUID:
    """The derived config a create or update job writes."""
    return uuid.uuid5(uuid.NAMESPACE_OID, f"converge-derived-config:{job_id}")


def _parsed(text: str | None) -> uuid.UUID | None:
    try:
        return uuid.UUID(text) if text else None
    except ValueError:
        return None


def _result(job: ResourceJob, outcome: JobOutcome, **fields: Any) -> JobResult:
    return JobResult.for_job(job, outcome, reporter="result", **fields)


def failed_run(job: ResourceJob, error: PermanentError) -> JobResult:
    """The result of a config or deployment job that cannot succeed (bad input, something
    missing): FAILED, with the reason."""
    reason = f"Resource {job.action.upper()} failed: {error}"
    return _result(job, JobOutcome.FAILED, physical_id=job.physical_id, reason=reason)


def gone_on_check(job: ResourceJob, reason: str) -> JobResult:
    """The result of a job whose stored config or deployment no longer exists (`reason`):
    a check finds the resource gone (the next update makes it again); any other action
    cannot run (PermanentError)."""
    if job.action is not JobAction.CHECK:
        raise PermanentError(reason)
    return _result(job, JobOutcome.GONE, physical_id=job.physical_id, reason=reason)


def attributes_of(record: DeploymentRecord) -> dict[str, Any]:
    """The resource's attributes: the three standard outputs (None until signalled) and
    every output the agent reported."""
    return {**dict.fromkeys(STANDARD_OUTPUTS), **dict(record.output_values)}


async def _source(tx: Tx, project_id: str, config: str | None) -> Mapping[str, Any]:
    """The source config's stored fields ({} without a config)."""
    if config is None:
        return {}
    config_id = _parsed(config)
    found = await tx.software_config(project_id, config_id) if config_id is not None else None
    if found is None:
        raise PermanentError(f"config: Software config with id {config} not found")
    return found.config


async def _write_derived(
    tx: Tx,
    job: ResourceJob,
    props: SoftwareDeploymentProperties,
    action: str,
    deployment_id: uuid.UUID,
    api_url: str,
) -> uuid.UUID:
    source = await _source(tx, job.project_id, props.config)
    url = None
    if props.signal_transport == TEMP_URL_SIGNAL:  # a fresh token for each delivered run
        url = signal_url(api_url, job.project_id, deployment_id, new_token())
    deploy = DeployContext(
        server_id=props.server,
        action=action,
        stack_id=f"{job.stack_name}/{job.stack_id}",
        resource_name=job.resource_name,
        signal_transport=props.signal_transport,
        signal_url=url,
    )
    stored = derived_config(source, props, deploy)
    group = "Heat::Ungrouped"
    if props.config is not None:
        found = await tx.software_config(job.project_id, uuid.UUID(props.config))
        group = found.group if found is not None else group
    name = props.name or f"{job.stack_name}-{job.resource_name}"
    made = await tx.insert_software_config(
        derived_config_id_of(job.job_id), job.project_id, name, group, stored
    )
    return made.config_id


async def run_deployment_job(
    tx: Tx, job: ResourceJob, types: Mapping[str, type[ResourceType]], *, api_url: str = DEFAULT_API_URL
) -> JobResult | None:
    """Run `job` against the deployment table: its result, or None while the job waits for
    the server's signal. A bad input is a failed result with the reason. `api_url`: the
    engine API's public base, for TEMP_URL_SIGNAL's signal URLs."""
    try:
        return await _run(tx, job, types, api_url)
    except PermanentError as exc:
        return failed_run(job, exc)


#: The actions of an existing deployment that may be delivered to its server (and waited for).
REDELIVERED = frozenset({"UPDATE", "DELETE", "SUSPEND", "RESUME"})


async def _run(
    tx: Tx, job: ResourceJob, types: Mapping[str, type[ResourceType]], api_url: str
) -> JobResult | None:
    cls = types.get(job.resource_type)
    if cls is None:
        raise PermanentError(f"unknown resource type {job.resource_type!r}")
    existing = _parsed(job.physical_id)
    record = await tx.software_deployment(job.project_id, existing) if existing is not None else None
    if job.action is JobAction.DELETE:
        if record is not None and _delivers_delete(job, record):
            return await _deliver(tx, job, cls, record, "DELETE", api_url)
        await _remove(tx, job.project_id, record)
        return _result(job, JobOutcome.COMPLETE, physical_id=job.physical_id)
    if job.action in (JobAction.CREATE, JobAction.UPDATE):
        if job.action is JobAction.UPDATE and record is None:
            raise PermanentError("the software deployment no longer exists")
        return await _deliver(tx, job, cls, record, job.action.value.upper(), api_url)
    if record is None:
        return gone_on_check(job, "the software deployment no longer exists")
    if job.action is JobAction.SNAPSHOT:
        raise PermanentError(f"{job.resource_type} takes no snapshots")
    if job.action in (JobAction.SUSPEND, JobAction.RESUME):
        return await _deliver(tx, job, cls, record, job.action.value.upper(), api_url)
    return _result(job, JobOutcome.COMPLETE, physical_id=job.physical_id, attributes=attributes_of(record))


def _props(job: ResourceJob, cls: type[ResourceType]) -> SoftwareDeploymentProperties:
    props = validate_properties(cls.properties, job.properties, "properties")
    assert isinstance(props, SoftwareDeploymentProperties)
    return props


def _delivers_delete(job: ResourceJob, record: DeploymentRecord) -> bool:
    """Whether a delete runs the config on the server first (DELETE in `actions`, a signal
    to wait for). Not when the server already failed (or never answered) this very
    delivery: deleting again then removes the deployment, so it can always be deleted."""
    props = job.properties
    actions = props.get("actions", ["CREATE", "UPDATE"])
    if not isinstance(actions, list) or "DELETE" not in actions:
        return False
    if props.get("signal_transport", HEAT_SIGNAL) == NO_SIGNAL:
        return False  # as Heat: nothing to wait for, and the deployment goes at once
    return not (record.action == "DELETE" and record.status == FAILED)


async def _remove(tx: Tx, project_id: str, record: DeploymentRecord | None) -> None:
    if record is not None:
        await tx.delete_software_deployment(project_id, record.deployment_id)
        await tx.delete_software_config(project_id, record.config_id)


async def _deliver(
    tx: Tx,
    job: ResourceJob,
    cls: type[ResourceType],
    record: DeploymentRecord | None,
    action: str,
    api_url: str,
) -> JobResult | None:
    """Deliver `action` to the server (a derived config for it, the deployment IN_PROGRESS)
    when the deployment's `actions` name it; None while the job waits for the signal."""
    props = _props(job, cls)
    delivered = action in props.actions
    if not delivered and record is not None and job.action not in (JobAction.CREATE, JobAction.UPDATE):
        return _result(  # a suspend or resume the config does not run for
            job, JobOutcome.COMPLETE, physical_id=str(record.deployment_id), attributes=attributes_of(record)
        )
    waits = delivered and props.signal_transport != NO_SIGNAL
    rerun = job.action in (JobAction.CREATE, JobAction.UPDATE)
    if not rerun and waits and record is not None and (record.action, record.status) == (action, IN_PROGRESS):
        return None  # a new delete (suspend, resume) job takes over the same run's wait
    deployment_id = record.deployment_id if record is not None else deployment_id_of(job.job_id)
    config_id = await _write_derived(tx, job, props, action, deployment_id, api_url)
    status = IN_PROGRESS if waits else COMPLETE
    reason = "Deploy data available" if waits else "Not waiting for outputs signal"
    if record is None:
        await _own(tx, job, deployment_id)
        record = await tx.insert_software_deployment(
            deployment_id,
            job.project_id,
            server_id=props.server,
            config_id=config_id,
            input_values=props.input_values,
            action=action,
            status=status,
            status_reason=reason,
            stack_id=uuid.UUID(job.stack_id),
            resource_name=job.resource_name,
        )
    elif record.config_id != config_id:  # not a replay of this very job
        old = record.config_id
        change = DeploymentChange(
            config_id=config_id,
            input_values=props.input_values,
            action=action,
            status=status,
            status_reason=reason,
        )
        updated = await tx.update_software_deployment(job.project_id, record.deployment_id, change)
        assert updated is not None
        record = updated
        await tx.delete_software_config(job.project_id, old)
    if waits:
        return None  # the server's signal completes the job (`signalled`)
    return _result(
        job, JobOutcome.COMPLETE, physical_id=str(record.deployment_id), attributes=attributes_of(record)
    )


async def _own(tx: Tx, job: ResourceJob, deployment_id: uuid.UUID) -> None:
    """Put the deployment's id on the resource's row now, not when the signal comes: a
    delete or a timeout before the signal then finds (and deletes) the deployment."""
    row = await tx.resource(job.resource_id)
    if row is None or row.current_job != job.job_id or row.physical_id is not None:
        return
    if not await tx.update_resource(row, ResourceChange(physical_id=str(deployment_id))):
        raise ConflictError(f"resource {row.name} changed while its deployment was written")


async def reap_deployment(tx: Tx, result: JobResult) -> None:
    """A stale create result: delete the deployment and its derived config."""
    made = _parsed(result.physical_id)
    if made is None:
        return
    record = await tx.software_deployment(result.project_id, made)
    if record is not None:
        await tx.delete_software_deployment(result.project_id, made)
        await tx.delete_software_config(result.project_id, record.config_id)


def waiting_deployment_id(row: ResourceRow) -> uuid.UUID | None:
    """The deployment the row's running job waits for, if any."""
    if row.current_job is None or row.status is not Status.IN_PROGRESS:
        return None
    if row.action.value == "CREATE":
        return deployment_id_of(row.current_job)
    if row.action.value in REDELIVERED:
        return _parsed(row.physical_id)
    return None


def _job_result(row: ResourceRow, record: DeploymentRecord, ok: bool, reason: str) -> JobResult:
    assert row.current_job is not None
    action = JobAction(row.action.value.lower())
    return JobResult(
        id=f"{row.current_job}:signalled",
        job_id=row.current_job,
        stack_id=str(row.stack_id),
        traversal_id=str(row.traversal_id),
        resource_id=row.resource_id,
        resource_name=row.name,
        action=action,
        outcome=JobOutcome.COMPLETE if ok else JobOutcome.FAILED,
        physical_id=str(record.deployment_id),
        attributes=attributes_of(record) if action is not JobAction.DELETE else {},
        reason="" if ok else f"Resource {action.value.upper()} failed: {reason}",
        resource_type=row.type,
        project_id=record.project_id,
    )


async def signalled(
    tx: Tx, record: DeploymentRecord, outcome: SignalOutcome, fx: Effects, *, status_reason: str | None = None
) -> DeploymentRecord:
    """Record the agent's outcome on an IN_PROGRESS deployment and complete the job waiting
    for it. A deployment not in progress keeps its state (Heat ignores such a signal)."""
    if record.status != IN_PROGRESS:
        return record
    status = COMPLETE if outcome.ok else FAILED
    change = DeploymentChange(
        output_values=outcome.output_values,
        status=status,
        status_reason=status_reason if status_reason is not None else outcome.reason,
    )
    updated = await tx.update_software_deployment(record.project_id, record.deployment_id, change)
    assert updated is not None
    if updated.stack_id is not None and updated.resource_name is not None:
        rows = await tx.current_resources(StackId(updated.stack_id), [updated.resource_name])
        row = rows.get(updated.resource_name)
        if row is not None and waiting_deployment_id(row) == updated.deployment_id:
            fx.emit(ENGINE_QUEUE, _job_result(row, updated, outcome.ok, updated.status_reason))
            if outcome.ok and row.action is Action.DELETE:  # the server ran its DELETE: now it goes
                await _remove(tx, updated.project_id, updated)
    return updated


async def wait_expired(
    tx: Tx, project_id: str, row: ResourceRow, *, waited: float, limit: float, fx: Effects
) -> bool:
    """The recovery sweep's check of a deployment row: when its job has waited `limit`
    seconds or more for the server's signal, the deployment fails as a failed signal
    would fail it (its job's result sent), and True."""
    deployment_id = waiting_deployment_id(row)
    if deployment_id is None or waited < limit:
        return False
    record = await tx.software_deployment(project_id, deployment_id, lock=True)
    if record is None or record.status != IN_PROGRESS:
        return False
    reason = f"Deployment timed out: no signal from server {record.server_id} within {limit:g}s"
    await signalled(tx, record, SignalOutcome(False, dict(record.output_values), reason), fx)
    return True


async def declared_outputs(tx: Tx, record: DeploymentRecord) -> list[Mapping[str, Any]]:
    config = await tx.software_config(record.project_id, record.config_id)
    return list(config.config.get("outputs") or []) if config is not None else []


async def signal_resource(
    tx: Tx, row: ResourceRow, project_id: str, details: Mapping[str, Any], fx: Effects
) -> None:
    """A resource signal to a deployment resource (HEAT_SIGNAL): the agent's outputs."""
    deployment_id = waiting_deployment_id(row) or _parsed(row.physical_id)
    record = (
        await tx.software_deployment(project_id, deployment_id, lock=True)
        if deployment_id is not None
        else None
    )
    if record is None:
        raise NotFound(f"{row.name} has no software deployment to signal")
    outcome = signal_outcome(details, await declared_outputs(tx, record))
    await signalled(tx, record, outcome, fx)


async def agent_may(tx: Tx, project_id: str, server_id: str, token: str) -> bool:
    """Whether `token` is the agent token of the server (compared in constant time)."""
    if not token:
        return False
    tokens = await tx.server_agent_tokens(project_id, server_id)
    return any(hmac.compare_digest(t.encode(), token.encode()) for t in tokens)


async def update_deployment(
    tx: Tx, project_id: str, deployment_id: uuid.UUID, change: DeploymentChange, fx: Effects
) -> DeploymentRecord:
    """`PUT /software_deployments/{id}` (checked by the API): a final status on an
    IN_PROGRESS deployment is its agent's signal (`signalled`, with the given outputs and
    reason); every other change is written as given."""
    record = await tx.software_deployment(project_id, deployment_id, lock=True)
    if record is None:
        raise NotFound(f"Software deployment with id {deployment_id} not found")
    rest = change
    status = change.status
    if record.status == IN_PROGRESS and status in (COMPLETE, FAILED):
        outputs = dict(change.output_values or record.output_values)
        reason = change.status_reason
        rest = replace(change, output_values=None, status_reason=None, status=None)
        outcome = SignalOutcome(status == COMPLETE, outputs, reason or f"Outputs received ({status})")
        record = await signalled(tx, record, outcome, fx, status_reason=reason)
    if not rest.empty:
        updated = await tx.update_software_deployment(project_id, deployment_id, rest)
        assert updated is not None
        record = updated
    return record
