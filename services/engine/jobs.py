"""The jobs the engine sends and the data dependents read, built from rows.

`job_for` makes the `ResourceJob` for an action on a row; `deadline_for` is
when it is abandoned (the stack's timeout, else an hour, from `now`, which the
caller reads from its injected clock, `core.sources`); `reference_data` is
what a completed resource passes to the resources that depend on it, and
`output_data` what a stack's outputs read of its current rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.engine.core.child_attributes import GroupAttributes
from services.engine.core.model import Reference, ResourceRow, StackRow, Status, TraversalId
from services.engine.core.nesting import CHAIN_TYPE, GROUP_TYPE
from services.engine.template import ResourceData
from services.engine.template.environment import is_template_reference
from shared.plugins import ResourceType
from shared.protocol import JobAction, ResourceJob

DEFAULT_JOB_SECONDS = 3600.0


def deadline_for(stack: StackRow | None, *, now: float) -> float:
    minutes = stack.timeout_mins if stack is not None else None
    return now + (minutes * 60.0 if minutes else DEFAULT_JOB_SECONDS)


def job_for(
    stack: StackRow | None,
    row: ResourceRow,
    *,
    job_id: str,
    traversal: TraversalId,
    action: JobAction,
    type_name: str,
    physical_id: str | None,
    properties: Mapping[str, Any],
    now: float,
    previous: Mapping[str, Any] | None = None,
) -> ResourceJob:
    """The job message for an action on `row`, sent at `now`."""
    return ResourceJob(
        job_id=job_id,
        stack_id=str(row.stack_id),
        stack_name=stack.name if stack else "",
        project_id=stack.project_id if stack else "",
        traversal_id=str(traversal),
        resource_id=row.resource_id,
        resource_name=row.name,
        resource_type=type_name,
        action=action,
        physical_id=physical_id,
        properties=dict(properties),
        previous_properties=dict(previous or {}) or None,
        deadline=deadline_for(stack, now=now),
        snapshot_first=action is JobAction.DELETE and row.deletion_policy == "Snapshot",
    )


def reference_data(row: ResourceRow | Reference, types: Mapping[str, type[ResourceType]]) -> ResourceData:
    """What a dependency passes on: its reference id and attributes. A template
    resource's reference is its `OS::stack_id` (the child's id unless its template
    sets that output); a group's attributes also answer `resource.<n>.<name>`."""
    cls = types.get(row.type)
    reference = row.physical_id
    attribute = cls.reference_attribute if cls is not None else None
    if cls is None and is_template_reference(row.type):
        attribute = "OS::stack_id"
    if attribute is not None:
        value = row.attributes.get(attribute, reference if cls is None else None)
        reference = None if value is None else str(value)
    attributes: Mapping[str, Any] = row.attributes
    if row.type in (GROUP_TYPE, CHAIN_TYPE):
        attributes = GroupAttributes(row.attributes)
    return ResourceData(reference_id=reference, attributes=attributes)


def output_data(
    rows: Mapping[str, ResourceRow], types: Mapping[str, type[ResourceType]]
) -> dict[str, ResourceData]:
    """What a stack's outputs (a stack show's, a nested stack's answer to its parent) read
    of its current `rows`, by name: a failed resource's error, a created one's
    `reference_data`; a resource not created yet passes nothing."""
    data: dict[str, ResourceData] = {}
    for name, row in rows.items():
        if row.status is Status.FAILED:
            data[name] = ResourceData(None, error=row.status_reason or "the resource failed")
        elif row.physical_id is not None:
            data[name] = reference_data(row, types)
    return data
