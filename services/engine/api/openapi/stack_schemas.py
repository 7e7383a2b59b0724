"""The stack area's parameters, queries and bodies, as the OpenAPI document gives them.

Where it sits: `stack_paths` (beside it) describes the stack, resource and
event operations with these: the path parameters of a stack, a resource and a
stack named by name or id alone; the list queries (paging, filters, sort keys);
the views of a stack, an output, a resource and an event; the bodies of an
action, a signal, a snapshot and marking a resource unhealthy; and the answers
of the Converge extensions (observation, graph) and of abandon. Pure data.
"""

from __future__ import annotations

from services.engine.api.openapi.building import PAGING, Json, bool_query, obj, query_param

STACK_PARAMS = ("project_id", "stack_name", "stack_id")
RESOURCE_PARAMS = (*STACK_PARAMS, "resource_name")
IDENTITY_PARAMS = ("project_id", "stack_identity")
STACK_LIST_QUERY = (
    *PAGING,
    query_param(
        "sort_keys",
        {"type": "string", "enum": ["stack_name", "stack_status", "creation_time", "updated_time"]},
        "Sort key (creation_time when absent or unknown).",
    ),
    query_param("name", {"type": "string"}, "Only stacks with this name (repeatable)."),
    query_param("stack_name", {"type": "string"}, "Alias of name."),
    query_param("stack_status", {"type": "string"}, "Only stacks in this state, e.g. CREATE_COMPLETE."),
    query_param("status", {"type": "string"}, "Alias of stack_status."),
    query_param("id", {"type": "string", "format": "uuid"}, "Only the stack with this id (repeatable)."),
    query_param("tags", {"type": "string"}, "Only stacks with every one of these comma-separated tags."),
    query_param(
        "tags_any", {"type": "string"}, "Only stacks with at least one of these comma-separated tags."
    ),
    query_param(
        "not_tags", {"type": "string"}, "Only stacks without at least one of these comma-separated tags."
    ),
    query_param("not_tags_any", {"type": "string"}, "Only stacks with none of these comma-separated tags."),
    bool_query("global_tenant", "Admins only: list every project's stacks."),
    bool_query("show_deleted", "Include deleted stacks."),
    bool_query(
        "with_resource_counts",
        "Converge extension: give each stack resource_counts, its resources counted by status.",
    ),
    bool_query(
        "with_observation",
        "Converge extension: give each stack observation: enabled, interval (s), heal, and drifted "
        "(how many of its resources have drifted now).",
    ),
)
EVENT_FILTERS = (
    query_param(
        "resource_action",
        {"type": "string"},
        "Only events of this action, e.g. CREATE (repeatable).",
    ),
    query_param(
        "resource_status",
        {"type": "string"},
        "Only events of this status, e.g. COMPLETE or CREATE_COMPLETE (repeatable).",
    ),
    query_param("resource_type", {"type": "string"}, "Only events of resources of this type (repeatable)."),
    query_param(
        "sort_keys",
        {"type": "string", "enum": ["event_time", "resource_type"]},
        "Sort by these keys (repeatable or comma-separated; others are ignored, as Heat does). Without "
        "sort_keys and sort_dir, events come oldest first.",
    ),
)
EVENT_QUERY = (
    *PAGING,
    *EVENT_FILTERS,
    query_param("resource_name", {"type": "string"}, "Only this resource's events (repeatable)."),
    query_param(
        "nested_depth",
        {"type": "integer", "minimum": 0, "maximum": 100},
        "Also the events of nested stacks this many levels down (each links its root stack).",
    ),
)
LINKS = {"type": "array", "items": obj({"href": {"type": "string"}, "rel": {"type": "string"}})}
STACK_VIEW = obj(
    {"id": {"type": "string"}, "stack_name": {"type": "string"}, "stack_status": {"type": "string"}}
)
OUTPUT_VIEW = obj({"output_key": {"type": "string"}, "description": {"type": "string"}})
RESOURCE_VIEW = obj({"resource_name": {"type": "string"}, "resource_status": {"type": "string"}})
_DEPLOYMENT = obj(
    {
        "name": {"type": "string", "description": "The resource (or group member) it belongs to."},
        "id": {"type": ["string", "null"], "description": "null: not written yet."},
        "server_id": {"type": ["string", "null"]},
        "action": {"type": ["string", "null"]},
        "status": {"type": ["string", "null"], "enum": ["IN_PROGRESS", "COMPLETE", "FAILED", None]},
        "status_reason": {"type": "string"},
        "outputs": {
            "type": "object",
            "description": "deploy_stdout, deploy_stderr, deploy_status_code, declared outputs.",
        },
    }
)
_INT_OR_NULL = {"type": ["integer", "null"]}
RESOURCE_SUMMARY = obj(
    {
        "summary": obj(
            {
                "kind": {
                    "type": "string",
                    "enum": [
                        "resource",
                        "deployment",
                        "deployment_group",
                        "autoscaling_group",
                        "resource_group",
                    ],
                },
                "deployment": {"anyOf": [_DEPLOYMENT, {"type": "null"}]},
                "deployments": {"anyOf": [{"type": "array", "items": _DEPLOYMENT}, {"type": "null"}]},
                "more_members": {
                    "type": "integer",
                    "description": "Members of a deployment group not listed.",
                },
                "size": {
                    "anyOf": [
                        obj(
                            {
                                "current_size": {"type": "integer"},
                                "desired_size": _INT_OR_NULL,
                                "min_size": _INT_OR_NULL,
                                "max_size": _INT_OR_NULL,
                                "desired_capacity": _INT_OR_NULL,
                                "count": _INT_OR_NULL,
                            }
                        ),
                        {"type": "null"},
                    ]
                },
            },
            required=("kind",),
        )
    },
    required=("summary",),
)
EVENT_VIEW = obj({"id": {"type": "string"}, "resource_status": {"type": "string"}})
OBSERVATION = obj(
    {
        "enabled": {"type": "boolean"},
        "interval": {"type": ["number", "null"]},
        "heal": {"type": "boolean"},
        "last_cycle_at": {"type": ["string", "null"], "format": "date-time"},
        "drifted": {
            "type": "array",
            "items": obj(
                {
                    "resource_name": {"type": "string"},
                    "physical_resource_id": {"type": ["string", "null"]},
                    "reason": {"type": "string"},
                    "differences": {"type": "object"},
                }
            ),
        },
    }
)
GRAPH = obj(
    {
        "graph": obj(
            {
                "stack": STACK_VIEW,
                "cursor": {"type": "integer", "description": "Stream from here: .../stream?after=cursor."},
                "nodes": {
                    "type": "array",
                    "items": obj(
                        {
                            "name": {"type": "string"},
                            "type": {"type": "string"},
                            "action": {"type": "string"},
                            "status": {"type": "string"},
                            "status_reason": {"type": "string"},
                            "physical_resource_id": {"type": "string"},
                            "replaced": {"type": "boolean"},
                            "drifted": {"type": "boolean"},
                        }
                    ),
                },
                "edges": {
                    "type": "array",
                    "items": obj({"from": {"type": "string"}, "to": {"type": "string"}}),
                    "description": "One per dependency: `to` requires `from`.",
                },
                "layout": obj(
                    {
                        "node_width": {"type": "number"},
                        "node_height": {"type": "number"},
                        "width": {"type": "number"},
                        "height": {"type": "number"},
                        "positions": {
                            "type": "object",
                            "description": "name -> [x, y, row]: a box's top-left corner (CSS pixels) "
                            "and its row in `rows`.",
                        },
                        "rows": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}},
                        "edges": {
                            "type": "array",
                            "items": obj(
                                {
                                    "from": {"type": "string"},
                                    "to": {"type": "string"},
                                    "points": {"type": "array", "items": {"type": "array"}},
                                    "arrow": {"type": "boolean"},
                                }
                            ),
                            "description": "Each dependency's path, routed between the boxes (never "
                            "through one): the part no earlier edge drew (edges of one source or "
                            "target share a trunk); `arrow`: the path ends on its target.",
                        },
                    }
                ),
            },
            required=("nodes", "edges", "cursor"),
        )
    }
)
ABANDON_DATA = obj(
    {
        "id": {"type": "string"},
        "name": {"type": "string"},
        "template": {"type": "object"},
        "resources": {
            "type": "object",
            "additionalProperties": obj({"resource_id": {"type": "string"}, "type": {"type": "string"}}),
        },
    }
)
ACTION_BODY: Json = {
    "type": "object",
    "minProperties": 1,
    "maxProperties": 1,
    "description": "Exactly one action: "
    '{"cancel_update": null}, {"cancel_without_rollback": null}, {"check": null}, '
    '{"suspend": null}, {"resume": null}, {"observe_start": {"interval": <seconds>, "heal": <bool>}} '
    'or {"observe_stop": null}; others answer 400 NotSupported. '
    "check, suspend and resume answer 409 while an operation is in progress; "
    "resume only a suspended stack. observe_start: interval from 1 to 86400 seconds (default 60), "
    "heal (default false) converges drifted resources back to the template.",
}
SIGNAL_BODY = obj(
    {
        "status": {"type": "string", "enum": ["SUCCESS", "FAILURE"]},
        "reason": {"type": "string"},
        "data": {"description": "Any JSON value."},
        "id": {"type": ["string", "integer"]},
        "unset_hook": {
            "type": "string",
            "enum": ["pre-create", "pre-update", "pre-delete"],
            "description": "Clear the hook the resource is paused at (any resource; a project token "
            "is needed). 400 when the resource is not paused at it.",
        },
    }
)
SNAPSHOT = obj(
    {
        "id": {"type": "string", "format": "uuid"},
        "name": {"type": ["string", "null"]},
        "action": {"type": "string"},
        "status": {"type": "string", "enum": ["IN_PROGRESS", "COMPLETE", "FAILED"]},
        "status_reason": {"type": "string"},
        "data": {
            "type": "object",
            "description": "The stack's template, environment, files, parameters, tags and resources "
            "(each with what its type's own snapshot kept, resource_data).",
        },
        "creation_time": {"type": "string", "format": "date-time"},
    }
)
SNAPSHOT_BODY = obj(
    {"name": {"type": ["string", "null"], "maxLength": 255, "description": "The snapshot's name."}}
)
MARK_UNHEALTHY_BODY = obj(
    {
        "mark_unhealthy": {"type": "boolean"},
        "resource_status_reason": {"type": "string", "maxLength": 1000},
    },
    required=("mark_unhealthy",),
)
REDIRECT = {
    "302": {
        "description": "Found: the stack's canonical URL, stacks/{stack_name}/{stack_id}[/sub-path].",
        "headers": {"Location": {"schema": {"type": "string"}}},
    }
}
