"""The config (and deployment) resource types' jobs, run by the engine in the transaction
that issues them.

Where it sits: `convergence.issuing` issues a job for a resource of a config type
(`shared.plugins.builtin.software_config.CONFIG_TYPES`) like any job, but
instead of sending it to the workers it calls `run_config_job` in the same
transaction: the config row is written (or deleted) in `software_configs` and
the job's `JobResult` goes to the engine queue through the outbox, so the
engine stays the only writer of the database and the result is never lost or
separated from the write. The config id is made from the job id, so a job run
twice writes one config; recovery never sends such a job to a worker (its
result left with the transaction that ran it). A stale result of such a job
(a newer job took over the row first) deletes the config it made, unless a row
owns it (`reap_config`, from `convergence.reaping`).

The deployment types (OS::Heat::SoftwareDeployment, StructuredDeployment) are
run the same way, by `services.engine.deployments`, except that a deployment's
create or update job usually waits for the server's signal: `run_config_job`
then returns None and the signal sends the result.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping

from services.engine.deployments import (
    failed_run,
    gone_on_check,
    is_deployment_type,
    reap_deployment,
    run_deployment_job,
)
from services.engine.store.tx import Tx
from shared.errors import PermanentError
from shared.plugins import ResourceType
from shared.plugins.builtin.software_config import CONFIG_TYPES, config_spec, referenced_ids
from shared.plugins.runtime import validate_properties
from shared.protocol import JobAction, JobOutcome, JobResult, ResourceJob

#: Largest config text (bytes of its JSON) stored by default (CONVERGE_MAX_SOFTWARE_CONFIG_BYTES).
DEFAULT_CONFIG_BYTES = 1024 * 1024


def is_config_type(type_name: str) -> bool:
    """Whether the engine runs this type's jobs here (configs and deployments)."""
    return type_name in CONFIG_TYPES or is_deployment_type(type_name)


def config_size(value: object) -> int:
    """Bytes a config's text (or map, as JSON) takes."""
    text = value if isinstance(value, str) else json.dumps(value)
    return len(text.encode())


def config_id_of(job_id: str) -> uuid.UUID:
    """The config a create job makes: the same on every run of the job."""
    return uuid.uuid5(uuid.NAMESPACE_OID, f"converge-software-config:{job_id}")


async def run_config_job(
    tx: Tx, job: ResourceJob, types: Mapping[str, type[ResourceType]], *, max_bytes: int, api_url: str
) -> JobResult | None:
    """Run `job` against the config table; a result (failed with a reason on bad input), or
    None for a deployment that waits for its server's signal. `api_url`: the engine API's
    public base (a deployment's TEMP_URL_SIGNAL URL)."""
    if is_deployment_type(job.resource_type):
        return await run_deployment_job(tx, job, types, api_url=api_url)
    try:
        return await _run(tx, job, types, max_bytes)
    except PermanentError as exc:
        return failed_run(job, exc)


def _result(job: ResourceJob, outcome: JobOutcome, **fields: object) -> JobResult:
    return JobResult.for_job(job, outcome, reporter="result", **fields)


def _parsed_id(physical_id: str | None) -> uuid.UUID | None:
    try:
        return uuid.UUID(physical_id) if physical_id else None
    except ValueError:
        return None


async def _run(
    tx: Tx, job: ResourceJob, types: Mapping[str, type[ResourceType]], max_bytes: int
) -> JobResult:
    cls = types.get(job.resource_type)
    if cls is None:
        raise PermanentError(f"unknown resource type {job.resource_type!r}")
    existing = _parsed_id(job.physical_id)
    if job.action is JobAction.DELETE:
        if existing is not None:
            await tx.delete_software_config(job.project_id, existing)
        return _result(job, JobOutcome.COMPLETE, physical_id=job.physical_id)
    if job.action is JobAction.CREATE:
        props = validate_properties(cls.properties, job.properties, "properties")
        referenced = {}
        for ref in referenced_ids(props):
            found = await tx.software_config(job.project_id, ref)
            if found is not None:
                referenced[ref] = found.config.get("config")
        spec = config_spec(props, referenced)
        size = config_size(spec.config)
        if size > max_bytes:
            raise PermanentError(f"the config is {size} bytes; at most {max_bytes} are allowed")
        name = f"{job.stack_name}-{job.resource_name}-{job.job_id[:12]}"
        made = await tx.insert_software_config(
            config_id_of(job.job_id), job.project_id, name, spec.group, spec.stored()
        )
        return _result(
            job,
            JobOutcome.COMPLETE,
            physical_id=str(made.config_id),
            attributes={"config": made.config.get("config")},
        )
    record = await tx.software_config(job.project_id, existing) if existing is not None else None
    if job.action is JobAction.UPDATE:  # every property replaces: a config is immutable
        return _result(
            job, JobOutcome.REPLACE, physical_id=job.physical_id, reason="a software config is immutable"
        )
    if record is None:
        return gone_on_check(job, "the software config no longer exists")
    if job.action is JobAction.SNAPSHOT:
        raise PermanentError(f"{job.resource_type} takes no snapshots")
    # CHECK, SUSPEND, RESUME: the config is there; nothing to pause.
    return _result(
        job,
        JobOutcome.COMPLETE,
        physical_id=job.physical_id,
        attributes={"config": record.config.get("config")},
    )


async def reap_config(tx: Tx, result: JobResult) -> None:
    """A stale create result: delete the config unless a row owns it (`convergence.reaping` asks)."""
    if is_deployment_type(result.resource_type):
        await reap_deployment(tx, result)
        return
    made = _parsed_id(result.physical_id)
    if made is not None:
        await tx.delete_software_config(result.project_id, made)
