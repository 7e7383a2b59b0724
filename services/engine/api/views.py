"""Heat v1 JSON shapes for stacks, resources and events. Pure formatting."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from services.engine.api.masking import NO_SECRETS, Secrets
from services.engine.store import Record
from services.engine.store.queries import StackView
from services.engine.template import OutputValue


def timestamp(value: datetime | None) -> str | None:
    """UTC, to the second, as Heat shows it ("2026-11-21T16:50:15Z"). isoformat, not
    strftime: a list of 100,000 resources formats 200,000 of these."""
    if value is None:
        return None
    if value.utcoffset():  # the database answers in UTC; anything else is converted
        value = value.astimezone(UTC)
    return value.isoformat(timespec="seconds")[:19] + "Z"


def stack_path(base: str, name: str, stack_id: uuid.UUID | str) -> str:
    return f"{base}/stacks/{name}/{stack_id}"


def stack_summary(stack: StackView, base: str, *, secrets: Secrets = NO_SECRETS) -> dict[str, Any]:
    return {
        "id": str(stack.stack_id),
        "stack_name": stack.name,
        "description": "",
        "creation_time": timestamp(stack.created_at),
        "updated_time": timestamp(stack.updated_at),
        "deletion_time": timestamp(stack.deleted_at),
        "stack_status": f"{stack.action}_{stack.status}",
        "stack_status_reason": secrets.mask(stack.status_reason),
        "stack_owner": None,
        "parent": str(stack.owner_stack_id) if stack.owner_stack_id is not None else None,
        "project": stack.project_id,
        "tags": list(stack.tags) or None,
        "links": [{"href": stack_path(base, stack.name, stack.stack_id), "rel": "self"}],
    }


def output_view(key: str, output: OutputValue, *, with_value: bool = True) -> dict[str, Any]:
    view: dict[str, Any] = {"output_key": key, "description": output.description or "No description given"}
    if with_value:
        view["output_value"] = output.value
        if output.error is not None:
            view["output_error"] = output.error
    return view


def stack_detail(
    stack: StackView,
    base: str,
    *,
    description: str,
    parameters: Mapping[str, Any],
    hidden: frozenset[str],
    outputs: Mapping[str, OutputValue] | None,
    secrets: Secrets = NO_SECRETS,
) -> dict[str, Any]:
    """Parameters named `hidden` (the current template's) are masked; outputs are shown as
    the template author wrote them (Heat does not mask them either)."""
    shown = replace(secrets, names=hidden).parameters({k: _param_text(v) for k, v in parameters.items()})
    shown.update(
        {
            "OS::stack_id": str(stack.stack_id),
            "OS::stack_name": stack.name,
            "OS::project_id": stack.project_id,
        }
    )
    return {
        **stack_summary(stack, base, secrets=secrets),
        "description": description,
        "template_description": description,
        "parameters": shown,
        "outputs": [output_view(k, v) for k, v in outputs.items()] if outputs is not None else [],
        "disable_rollback": stack.disable_rollback,
        "timeout_mins": stack.timeout_mins,
        "capabilities": [],
        "notification_topics": [],
        "stack_user_project_id": stack.project_id,
    }


def _param_text(value: Any) -> Any:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return value if isinstance(value, str | dict) else str(value)


def resource_view(
    row: Mapping[str, Any] | Record,
    stack: StackView,
    base: str,
    *,
    detail: bool = False,
    parent_resource: str | None = None,
    required_by: Sequence[str] | None = None,
    secrets: Secrets = NO_SECRETS,
) -> dict[str, Any]:
    """`stack` is the resource's own stack; `parent_resource` names the resource of the
    parent stack that owns it (a resource of a nested stack, listed with nested_depth);
    `secrets` masks what may hold a hidden parameter's value (reason, attributes)."""
    stack_url = stack_path(base, stack.name, stack.stack_id)
    view: dict[str, Any] = {
        "resource_name": row["name"],
        "logical_resource_id": row["name"],
        "physical_resource_id": row["physical_id"] or "",
        "resource_type": row["type"],
        "resource_status": f"{row['action']}_{row['status']}",
        "resource_status_reason": secrets.mask(row["status_reason"]),
        "creation_time": timestamp(row["created_at"]),
        "updated_time": timestamp(row["updated_at"]),
        "required_by": list(required_by if required_by is not None else row.get("required_by") or []),
        "links": [
            {"href": f"{stack_url}/resources/{row['name']}", "rel": "self"},
            {"href": stack_url, "rel": "stack"},
        ],
    }
    if row.get("nested_stack_id") is not None:
        nested_url = stack_path(base, row["nested_stack_name"], row["nested_stack_id"])
        view["links"].append({"href": nested_url, "rel": "nested"})
    if parent_resource is not None:
        view["parent_resource"] = parent_resource
    if detail:
        view["attributes"] = secrets.mask(dict(row["attributes"] or {}))
        view["metadata"] = secrets.mask(dict(row.get("metadata") or {}))
        view["description"] = ""
    return view


def event_view(
    row: Mapping[str, Any], stack: StackView, base: str, *, secrets: Secrets = NO_SECRETS
) -> dict[str, Any]:
    stack_url = stack_path(base, stack.name, stack.stack_id)
    resource_url = f"{stack_url}/resources/{row['resource_name']}"
    return {
        "id": str(row["event_id"]),
        "event_time": timestamp(row["created_at"]),
        "resource_name": row["resource_name"],
        "logical_resource_id": row["resource_name"],
        "physical_resource_id": row["physical_resource_id"] or "",
        "resource_status": f"{row['action']}_{row['status']}",
        "resource_status_reason": secrets.mask(row["reason"]),
        "resource_type": row["resource_type"],
        "links": [
            {"href": f"{resource_url}/events/{row['event_id']}", "rel": "self"},
            {"href": resource_url, "rel": "resource"},
            {"href": stack_url, "rel": "stack"},
        ],
    }


def page(items: Sequence[dict[str, Any]], key: str) -> dict[str, Any]:
    return {key: list(items)}


def json_response(data: Any, *, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    """JSON with `Content-Type: application/json` exactly, as Heat sends it."""
    body = json.dumps(data, separators=(",", ":")).encode()
    return web.Response(body=body, status=status, headers=headers, content_type="application/json")
