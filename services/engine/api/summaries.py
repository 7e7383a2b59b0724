"""`GET .../resources/{name}/summary` (Converge addition): what a resource's type says
about it beyond its status, for the dashboard's resource view.

Where it sits: `api.resources.dispatch` routes here; the dashboard
(`dashboard/static/summary.js`) reads it each time it shows a resource. A
software deployment (`OS::Heat::SoftwareDeployment`, `StructuredDeployment`) has
its deployment: the status its server's agent gave (IN_PROGRESS until the agent
signals), the status reason and the outputs (`deploy_stdout`, `deploy_stderr`,
`deploy_status_code` and the config's declared outputs), read from
`software_deployments` by the resource's physical id. A deployment group has one
such entry per member of its nested stack (at most `MAX_MEMBERS`). An
`OS::Heat::AutoScalingGroup` has its size: members now (`current_size`), the size
it is converging to (`desired_size`: its last scaling signal's or update's), and
its `min_size`, `max_size` and `desired_capacity`; an `OS::Heat::ResourceGroup`
its members now and its `count`. Any other type: `{"kind": "resource"}`.

Deciding the summary from the rows is pure (`deployment_summary`, `group_size`);
the handler reads the rows (a deployment per member, in one transaction) and masks
what may hold a hidden parameter's value, as a resource show does.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict

from services.engine.api.deps import ApiDeps
from services.engine.api.errors import not_found
from services.engine.api.views import json_response
from services.engine.core.nesting import DEPLOYMENT_GROUPS, GROUP_TYPE, SCALING_TYPE, scaling_state
from services.engine.store.queries import StackView
from services.engine.store.software_records import DeploymentRecord
from shared.plugins.builtin.software_deployment import DEPLOYMENT_TYPES

#: Members of a deployment group shown at most (the rest are counted in `more_members`).
MAX_MEMBERS = 200

Kind = Literal["resource", "deployment", "deployment_group", "autoscaling_group", "resource_group"]


class DeploymentSummary(BaseModel):
    """One software deployment as its server's agent left it."""

    model_config = ConfigDict(frozen=True)

    name: str  # the resource (a group's member) it belongs to
    id: str | None  # None: the deployment is not written yet (or is gone)
    server_id: str | None = None
    action: str | None = None
    status: str | None = None  # IN_PROGRESS, COMPLETE or FAILED
    status_reason: str = ""
    outputs: dict[str, Any] = {}


class GroupSize(BaseModel):
    model_config = ConfigDict(frozen=True)

    current_size: int  # members now (as of the group's last completed resize)
    desired_size: int | None = None  # what it is converging to
    min_size: int | None = None
    max_size: int | None = None
    desired_capacity: int | None = None  # the property, as the template gives it
    count: int | None = None  # a ResourceGroup's property


class ResourceSummary(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Kind = "resource"
    deployment: DeploymentSummary | None = None
    deployments: list[DeploymentSummary] | None = None
    more_members: int = 0
    size: GroupSize | None = None


def kind_of(type_name: str) -> Kind:
    if type_name in DEPLOYMENT_TYPES:
        return "deployment"
    if type_name in DEPLOYMENT_GROUPS:
        return "deployment_group"
    if type_name == SCALING_TYPE:
        return "autoscaling_group"
    if type_name == GROUP_TYPE:
        return "resource_group"
    return "resource"


def deployment_id(physical_id: str | None) -> uuid.UUID | None:
    """The deployment a deployment resource's physical id names (None before it has one)."""
    try:
        return uuid.UUID(physical_id) if physical_id else None
    except ValueError:
        return None


def deployment_summary(name: str, record: DeploymentRecord | None) -> DeploymentSummary:
    if record is None:
        return DeploymentSummary(name=name, id=None)
    return DeploymentSummary(
        name=name,
        id=str(record.deployment_id),
        server_id=record.server_id,
        action=record.action,
        status=record.status,
        status_reason=record.status_reason,
        outputs=dict(record.output_values),
    )


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def group_size(type_name: str, properties: Mapping[str, Any], attributes: Mapping[str, Any]) -> GroupSize:
    """A group's sizes from its row: properties as last applied, attributes as its child
    last reported (an AutoScalingGroup's `ScalingState` says what a signal decided)."""
    refs = attributes.get("refs")
    current = _count(attributes.get("current_size"))
    if current is None:
        current = len(refs) if isinstance(refs, list) else 0
    if type_name == GROUP_TYPE:
        count = _count(properties.get("count"))
        return GroupSize(current_size=current, desired_size=count, count=count)
    state = scaling_state(attributes)
    desired_capacity = _count(properties.get("desired_capacity"))
    min_size = _count(properties.get("min_size"))
    if state is not None:
        desired: int | None = state.size
    else:  # not created yet: the size its create aims at
        desired = desired_capacity if desired_capacity is not None else min_size
    return GroupSize(
        current_size=current,
        desired_size=desired,
        min_size=min_size,
        max_size=_count(properties.get("max_size")),
        desired_capacity=desired_capacity,
    )


async def show_summary(deps: ApiDeps, stack: StackView, name: str) -> web.Response:
    async with deps.reads.slot(stack.project_id):
        row = await deps.queries.resource(stack.stack_id, name)
        if row is None:
            raise not_found(f"The Resource ({name}) could not be found.")
        kind = kind_of(row["type"])
        members = []
        if kind == "deployment_group" and row["nested_stack_id"] is not None:
            members = await deps.queries.resources(row["nested_stack_id"], limit=MAX_MEMBERS + 1)
    summary = ResourceSummary(kind=kind)
    if kind == "deployment":
        records = await _deployments(deps, stack.project_id, [row["physical_id"]])
        summary = ResourceSummary(kind=kind, deployment=deployment_summary(name, records[0]))
    elif kind == "deployment_group":
        shown = members[:MAX_MEMBERS]
        records = await _deployments(deps, stack.project_id, [m["physical_id"] for m in shown])
        summary = ResourceSummary(
            kind=kind,
            deployments=[deployment_summary(m["name"], r) for m, r in zip(shown, records, strict=True)],
            more_members=len(members) - len(shown),
        )
    elif kind in ("autoscaling_group", "resource_group"):
        properties = row["properties"] if isinstance(row["properties"], dict) else {}
        attributes = dict(row["attributes"] or {})
        summary = ResourceSummary(kind=kind, size=group_size(row["type"], properties, attributes))
    secrets = await deps.secrets.for_stack(stack.stack_id)
    return json_response({"summary": secrets.mask(summary.model_dump(mode="json"))})


async def _deployments(
    deps: ApiDeps, project_id: str, physical_ids: list[str | None]
) -> list[DeploymentRecord | None]:
    """Each physical id's deployment in the project (None where there is none)."""
    found: list[DeploymentRecord | None] = []
    async with deps.store.transaction() as tx:
        for physical_id in physical_ids:
            ident = deployment_id(physical_id)
            found.append(await tx.software_deployment(project_id, ident) if ident is not None else None)
    return found
