"""Stack snapshots and exports: what they hold, and the goal a restore converges to. Pure.

Where it sits: `services.engine.snapshots` (the shell) takes a snapshot by
starting a SNAPSHOT action over the stack's resources; `stack_document` is
what the snapshot keeps (and what `stack export` answers): the stack's
template, environment, files, parameters, tags and each current resource
(physical id, type, state, metadata, properties), in the shape of Heat's
abandon data. Types that take snapshots (`ResourceType.supports_snapshot`)
add what their own snapshot kept (`resource_data`) as their jobs end. A
restore is an update back to the snapshot's goal (`restore_goal`), each such
type's properties rewritten by its `restore_properties` from that data.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from services.engine.core.model import ResourceRow, StackRow, Status, TraversalId
from shared.plugins import ResourceType

#: Snapshot states, as Heat names them.
IN_PROGRESS, COMPLETE, FAILED = "IN_PROGRESS", "COMPLETE", "FAILED"
SUPERSEDED = "Another operation started before the snapshot was complete"


def stack_document(
    stack: StackRow,
    *,
    template: Mapping[str, Any],
    environment: Mapping[str, Any],
    files: Mapping[str, str],
    parameters: Mapping[str, Any],
    tags: Sequence[str],
    rows: Sequence[ResourceRow],
    metadata: Mapping[int, Mapping[str, Any] | None],
) -> dict[str, Any]:
    """The stack as Heat's abandon/export data shows it (plus `parameters`, which
    Converge keeps apart from the environment, and each resource's properties)."""
    return {
        "id": str(stack.stack_id),
        "name": stack.name,
        "project_id": stack.project_id,
        "stack_user_project_id": stack.project_id,
        "action": stack.action.value,
        "status": stack.status.value,
        "tags": list(tags),
        "template": dict(template),
        "environment": dict(environment),
        "files": dict(files),
        "parameters": dict(parameters),
        "resources": {
            r.name: {
                "name": r.name,
                "resource_id": r.physical_id,
                "type": r.type,
                "action": r.action.value,
                "status": r.status.value,
                "metadata": dict(metadata.get(r.resource_id) or {}),
                "resource_data": {},
                "properties": dict(r.properties or {}),
            }
            for r in rows
            if r.replaced_by is None and r.physical_id is not None
        },
    }


def with_resource_data(document: Mapping[str, Any], kept: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """`document` with what each resource's own snapshot kept (by resource name)."""
    out = dict(document)
    resources = {name: dict(r) for name, r in (document.get("resources") or {}).items()}
    for name, data in kept.items():
        if name in resources:
            resources[name]["resource_data"] = dict(data)
    out["resources"] = resources
    return out


def shown_status(status: str, snapshot_id: TraversalId, stack: StackRow) -> tuple[str, str | None]:
    """A snapshot's status as shown: one still IN_PROGRESS whose SNAPSHOT action is no
    longer the stack's operation never completes (another operation preempted it),
    so it shows FAILED (with that reason; None: the stored reason stands)."""
    if status != IN_PROGRESS:
        return status, None
    running = stack.current_traversal == snapshot_id and stack.status is Status.IN_PROGRESS
    return (IN_PROGRESS, None) if running else (FAILED, SUPERSEDED)


def restore_goal(
    document: Mapping[str, Any], types: Mapping[str, type[ResourceType]]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, str]]:
    """(template, environment, parameters, files) a restore converges to: the
    snapshot's, with the properties of each resource whose type kept its own snapshot
    rewritten by the type's `restore_properties`."""
    template = copy.deepcopy(dict(document.get("template") or {}))
    written = template.get("resources")
    for name, kept in (document.get("resources") or {}).items():
        data = kept.get("resource_data") if isinstance(kept, Mapping) else None
        cls = types.get(str(kept.get("type"))) if isinstance(kept, Mapping) else None
        snippet = written.get(name) if isinstance(written, dict) else None
        if not data or cls is None or not cls.supports_snapshot or not isinstance(snippet, dict):
            continue
        properties = snippet.get("properties")
        snippet["properties"] = dict(
            cls.restore_properties(properties if isinstance(properties, Mapping) else {}, data)
        )
    return (
        template,
        dict(document.get("environment") or {}),
        dict(document.get("parameters") or {}),
        dict(document.get("files") or {}),
    )
