"""The OpenAPI paths of stacks and what is under them: outputs, actions,
snapshots, resources and events.

Where it sits: `openapi_document` (this package) gathers these. Most of them
hide behind one catch-all aiohttp route (`StackRoutes.dispatch` walks
`stacks/{name}/{id}/...` and hands resources and events to
`resources.dispatch`), so the router alone cannot describe them: they are
written out here, one per sub-path the dispatchers answer, with the
parameters, queries and bodies of `stack_schemas`. Pure data.
"""

from __future__ import annotations

from collections.abc import Callable

from services.engine.api.openapi.building import (
    ANY_OBJECT,
    PAGING,
    Json,
    json_content,
    list_of,
    obj,
    operation,
    query_param,
    ref,
)
from services.engine.api.openapi.stack_schemas import (
    ABANDON_DATA,
    ACTION_BODY,
    EVENT_FILTERS,
    EVENT_QUERY,
    EVENT_VIEW,
    GRAPH,
    IDENTITY_PARAMS,
    LINKS,
    MARK_UNHEALTHY_BODY,
    OBSERVATION,
    OUTPUT_VIEW,
    REDIRECT,
    RESOURCE_PARAMS,
    RESOURCE_SUMMARY,
    RESOURCE_VIEW,
    SIGNAL_BODY,
    SNAPSHOT,
    SNAPSHOT_BODY,
    STACK_LIST_QUERY,
    STACK_PARAMS,
    STACK_VIEW,
)


def stack_paths() -> Json:
    stacks = "/v1/{project_id}/stacks"
    one = f"{stacks}/{{stack_name}}/{{stack_id}}"
    body = ref("schemas", "StackBody")
    accepted = {"202": {"description": "Accepted: the update runs in the background."}}

    def get(
        summary: str, ok: Json, *, params: tuple[str, ...] = STACK_PARAMS, errors: tuple[int, ...] = ()
    ) -> Json:
        return {"get": operation(summary, {"200": json_content(ok, "OK.")}, params=params, errors=errors)}

    redirect = {  # also with any sub-path after the name or id: the redirect keeps it
        method: operation(f"{method.upper()} by name or id alone", REDIRECT, params=IDENTITY_PARAMS)
        for method in ("get", "put", "patch", "delete")
    }
    return {
        stacks: {
            "get": operation(
                "List stacks",
                {"200": json_content(list_of("stacks", STACK_VIEW), "OK.")},
                params=("project_id",),
                query=STACK_LIST_QUERY,
            ),
            "post": operation(
                "Create a stack",
                {
                    "201": {
                        **json_content(
                            obj({"stack": obj({"id": {"type": "string"}, "links": LINKS})}),
                            "Created.",
                        ),
                        "headers": {"Location": {"schema": {"type": "string"}}},
                    }
                },
                params=("project_id",),
                body=body,
                errors=(409,),
            ),
        },
        f"{stacks}/preview": {
            "post": operation(
                "Preview a create: the stack and resources it would make, changing nothing",
                {"200": json_content(obj({"stack": STACK_VIEW}), "OK.")},
                params=("project_id",),
                body=body,
            )
        },
        f"{stacks}/{{stack_identity}}": redirect,
        one: {
            "get": operation(
                "Show a stack", {"200": json_content(obj({"stack": STACK_VIEW}), "OK.")}, params=STACK_PARAMS
            ),
            "put": operation("Update a stack", accepted, params=STACK_PARAMS, body=body, errors=(409,)),
            "patch": operation(
                "Update a stack, keeping what is omitted",
                accepted,
                params=STACK_PARAMS,
                body=body,
                errors=(409,),
            ),
            "delete": operation(
                "Delete a stack", {"204": {"description": "Deleting."}}, params=STACK_PARAMS, errors=(409,)
            ),
        },
        f"{one}/template": get("The current template", ANY_OBJECT, errors=(409,)),
        f"{one}/template/source": get(
            "Converge extension: the current template's text as it was sent (comments kept); a "
            "template sent as an object is given as JSON text, with as_sent false",
            obj({"source": {"type": "string"}, "as_sent": {"type": "boolean"}}),
            errors=(409,),
        ),
        f"{one}/environment": get("The current environment", ANY_OBJECT, errors=(409,)),
        f"{one}/files": get("The current files", ANY_OBJECT, errors=(409,)),
        f"{one}/outputs": get("List outputs", list_of("outputs", OUTPUT_VIEW)),
        f"{one}/outputs/{{output_key}}": get(
            "Show an output", obj({"output": ANY_OBJECT}), params=(*STACK_PARAMS, "output_key")
        ),
        f"{one}/preview": {
            "put": operation(
                "Preview an update: added, deleted, replaced, updated, unchanged resources",
                {"200": json_content(obj({"resource_changes": ANY_OBJECT}), "OK.")},
                params=STACK_PARAMS,
                body=body,
                errors=(409,),
            )
        },
        f"{one}/actions": {
            "post": operation(
                "Run a stack action: cancel the operation in progress, or check, suspend, resume",
                {"200": {"description": "Started."}},
                params=STACK_PARAMS,
                body=ACTION_BODY,
                errors=(409,),
            )
        },
        f"{one}/observation": get(
            "Observation of the stack: settings, last round, and the drift that exists now",
            obj({"observation": OBSERVATION}),
        ),
        f"{one}/graph": get(
            "Converge extension: the stack's resources as a dependency graph, for the dashboard",
            GRAPH,
        ),
        f"{one}/stream": {
            "get": operation(
                "Converge extension: the stack's events as they happen (server-sent events)",
                {
                    "200": {
                        "description": "text/event-stream of `event: events` messages, each with `id:` "
                        'the last event\'s cursor and data {"stack": {stack_status, stack_status_reason}, '
                        '"events": [...]}; `event: gone` when the stack is deleted. Resume with '
                        "Last-Event-ID or ?after.",
                        "content": {"text/event-stream": {"schema": {"type": "string"}}},
                    }
                },
                params=STACK_PARAMS,
                query=(
                    query_param(
                        "after", {"type": "integer", "minimum": 0}, "Send the events after this cursor."
                    ),
                ),
                errors=(429,),
            )
        },
        f"{one}/abandon": {
            "delete": operation(
                "Abandon a stack: forget it, leaving its resources; returns the data adopt needs",
                {"200": json_content(ABANDON_DATA, "The abandon document (pass it as adopt_stack_data).")},
                params=STACK_PARAMS,
                errors=(409,),
            )
        },
        f"{one}/export": get(
            "Export a stack: what abandon would return, changing nothing", ABANDON_DATA, errors=(409,)
        ),
        f"{one}/snapshots": {
            "get": operation(
                "List the stack's snapshots",
                {"200": json_content(list_of("snapshots", SNAPSHOT), "OK.")},
                params=STACK_PARAMS,
            ),
            "post": operation(
                "Snapshot the stack (stack action SNAPSHOT): its template, environment, files, "
                "parameters and resources, with each snapshot-taking type's own snapshot",
                {"200": json_content(SNAPSHOT, "The snapshot, IN_PROGRESS until the SNAPSHOT action ends.")},
                params=STACK_PARAMS,
                body=SNAPSHOT_BODY,
                errors=(409,),
            ),
        },
        f"{one}/snapshots/{{snapshot_id}}": {
            "get": operation(
                "Show a snapshot",
                {"200": json_content(obj({"snapshot": SNAPSHOT}), "OK.")},
                params=(*STACK_PARAMS, "snapshot_id"),
            ),
            "delete": operation(
                "Delete a snapshot (not one in progress)",
                {"204": {"description": "Deleted."}},
                params=(*STACK_PARAMS, "snapshot_id"),
            ),
        },
        f"{one}/snapshots/{{snapshot_id}}/restore": {
            "post": operation(
                "Restore the stack to a complete snapshot: an update back to it (stack action RESTORE)",
                {"202": {"description": "Accepted: the restore runs in the background."}},
                params=(*STACK_PARAMS, "snapshot_id"),
                errors=(409,),
            )
        },
        **_resource_paths(one, get),
    }


def _resource_paths(one: str, get: Callable[..., Json]) -> Json:
    resource = f"{one}/resources/{{resource_name}}"
    events = list_of("events", EVENT_VIEW)
    event = obj({"event": EVENT_VIEW})
    return {
        f"{one}/resources": {
            "get": operation(
                "List resources",
                {"200": json_content(list_of("resources", RESOURCE_VIEW), "OK.")},
                params=STACK_PARAMS,
                query=(
                    query_param("type", {"type": "string"}, "Only resources of this type (repeatable)."),
                    query_param("name", {"type": "string"}, "Only resources of this name (repeatable)."),
                    query_param("status", {"type": "string"}, "Only resources in this status (repeatable)."),
                    query_param(
                        "nested_depth",
                        {"type": "integer", "minimum": 0, "maximum": 100},
                        "Also list resources of nested stacks this many levels down.",
                    ),
                    query_param(
                        "limit",
                        {"type": "integer", "minimum": 0, "maximum": 1000},
                        "Converge extension: at most this many resources, in name order (all when absent).",
                    ),
                    query_param(
                        "marker", {"type": "string"}, "With limit: start after the resource of this name."
                    ),
                ),
            )
        },
        resource: {
            **get("Show a resource", obj({"resource": RESOURCE_VIEW}), params=RESOURCE_PARAMS),
            "patch": operation(
                "Mark a resource unhealthy (or healthy again)",
                {"200": json_content(ANY_OBJECT, "Marked.")},
                params=RESOURCE_PARAMS,
                body=MARK_UNHEALTHY_BODY,
                errors=(409,),
            ),
        },
        f"{resource}/summary": get(
            "Converge addition: what the resource's type says beyond its status (a software "
            "deployment's status, reason and outputs, each of a deployment group's members', a "
            "group's sizes), as the dashboard shows it",
            RESOURCE_SUMMARY,
            params=RESOURCE_PARAMS,
        ),
        f"{resource}/metadata": get(
            "A resource's metadata", obj({"metadata": ANY_OBJECT}), params=RESOURCE_PARAMS
        ),
        f"{resource}/signal": {
            "post": operation(
                "Signal a wait-condition handle (the X-Auth-Token may be the handle's own token), or "
                "clear the hook a resource is paused at (unset_hook)",
                {"200": {"description": "Signalled."}},
                params=RESOURCE_PARAMS,
                body=SIGNAL_BODY,
                errors=(409, 413),
            )
        },
        f"{resource}/events": {
            "get": operation(
                "List a resource's events (404 when it has none, as Heat)",
                {"200": json_content(events, "OK.")},
                params=RESOURCE_PARAMS,
                query=(*PAGING, *EVENT_FILTERS),
            )
        },
        f"{resource}/events/{{event_id}}": get("Show an event", event, params=(*RESOURCE_PARAMS, "event_id")),
        f"{one}/events": {
            "get": operation(
                "List events", {"200": json_content(events, "OK.")}, params=STACK_PARAMS, query=EVENT_QUERY
            )
        },
        f"{one}/events/{{event_id}}": get("Show an event", event, params=(*STACK_PARAMS, "event_id")),
    }
