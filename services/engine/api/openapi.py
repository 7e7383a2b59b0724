"""The OpenAPI 3.1 document of everything the engine's HTTP app serves.

`build_app` mounts the health routes, this document at `/openapi.json`, and
the Heat v1 API. Most of the v1 API hides behind one catch-all aiohttp route
(`StackRoutes.dispatch` walks `stacks/{name}/{id}/...` and hands resources and
events to `resources.dispatch`), so the router alone cannot describe it: the
paths here are written out by hand, one per sub-path the dispatchers answer,
and tests/integration/test_openapi.py fails when the router or the
dispatchers grow a path this document lacks. Request bodies for stacks come
from the pydantic `StackBody` model, so the document cannot drift from what
`parse_body` accepts; errors share Heat's JSON shape (`errors.error_body`).

`openapi_document()` is pure data; `openapi_route()` serves it without a
token, like `/healthz` (the auth middleware only guards `/v1/...`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from aiohttp import web

from services.engine.api.discovery import UNSUPPORTED
from services.engine.api.requests import StackBody
from services.engine.api.views import json_response

Json = dict[str, Any]

_ERROR_DESCRIPTIONS = {
    400: "Invalid input: the message names the problem.",
    401: "No valid X-Auth-Token header.",
    403: "The token's role may not do this (a reader changing something), or grants nothing here.",
    404: "Not found (also: another project's URL, as if nothing were there).",
    405: "The method is not allowed on this path.",
    409: "Conflict with the stack's current state (e.g. a duplicate name, or no template yet).",
    413: "The body is larger than this operation accepts (the message names the limit).",
    429: "Too many of these are open for this token (the message names the limit).",
    501: "Not supported by Converge: the message names what.",
}
#: Answers every /v1 operation may give, whatever its own.
_V1_ERRORS = (400, 401, 403, 404)


def _ref(kind: str, name: str) -> Json:
    return {"$ref": f"#/components/{kind}/{name}"}


def _json(schema: Json, description: str) -> Json:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _object(properties: Json, *, required: tuple[str, ...] = ()) -> Json:
    schema: Json = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


def _list_of(key: str, item: Json) -> Json:
    return _object({key: {"type": "array", "items": item}}, required=(key,))


def _path_param(name: str, description: str) -> Json:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "string", "minLength": 1},
    }


def _query(name: str, schema: Json, description: str) -> Json:
    return {"name": name, "in": "query", "required": False, "description": description, "schema": schema}


def _bool_query(name: str, description: str) -> Json:
    return _query(name, {"type": "string", "enum": ["true", "false"]}, description)


def _operation(
    summary: str,
    responses: Json,
    *,
    params: tuple[str, ...] = (),
    query: tuple[Json, ...] = (),
    body: Json | None = None,
    errors: tuple[int, ...] = (),
    tag: str = "stacks",
    v1: bool = True,
) -> Json:
    """One operation; /v1 operations need a token and may answer 400/401/403/404 as Heat does."""
    op: Json = {"summary": summary, "tags": [tag], "responses": dict(responses)}
    parameters = [_ref("parameters", p) for p in params] + list(query)
    if parameters:
        op["parameters"] = parameters
    if body is not None:
        op["requestBody"] = {"required": False, "content": {"application/json": {"schema": body}}}
    if v1:
        op["security"] = [{"XAuthToken": []}]
        for code in sorted({*_V1_ERRORS, *errors}):
            op["responses"][str(code)] = _ref("responses", f"Error{code}")
    return op


# -- reusable parts -----------------------------------------------------------

_STACK = ("project_id", "stack_name", "stack_id")
_RESOURCE = (*_STACK, "resource_name")
_IDENTITY = ("project_id", "stack_identity")
_PAGING = (
    _query("limit", {"type": "integer", "minimum": 0}, "At most this many items (capped at 1000)."),
    _query("marker", {"type": "string", "format": "uuid"}, "Start after the item with this id."),
    _query("sort_dir", {"type": "string", "enum": ["asc", "desc"]}, "Sort direction."),
)
_STACK_LIST_QUERY = (
    *_PAGING,
    _query(
        "sort_keys",
        {"type": "string", "enum": ["stack_name", "stack_status", "creation_time", "updated_time"]},
        "Sort key (creation_time when absent or unknown).",
    ),
    _query("name", {"type": "string"}, "Only stacks with this name (repeatable)."),
    _query("stack_name", {"type": "string"}, "Alias of name."),
    _query("stack_status", {"type": "string"}, "Only stacks in this state, e.g. CREATE_COMPLETE."),
    _query("status", {"type": "string"}, "Alias of stack_status."),
    _query("id", {"type": "string", "format": "uuid"}, "Only the stack with this id (repeatable)."),
    _query("tags", {"type": "string"}, "Only stacks with every one of these comma-separated tags."),
    _query("tags_any", {"type": "string"}, "Only stacks with at least one of these comma-separated tags."),
    _query("not_tags", {"type": "string"}, "Only stacks without at least one of these comma-separated tags."),
    _query("not_tags_any", {"type": "string"}, "Only stacks with none of these comma-separated tags."),
    _bool_query("global_tenant", "Admins only: list every project's stacks."),
    _bool_query("show_deleted", "Include deleted stacks."),
    _bool_query(
        "with_resource_counts",
        "Converge extension: give each stack resource_counts, its resources counted by status.",
    ),
    _bool_query(
        "with_observation",
        "Converge extension: give each stack observation: enabled, interval (s), heal, and drifted "
        "(how many of its resources have drifted now).",
    ),
)
_EVENT_FILTERS = (
    _query(
        "resource_action",
        {"type": "string"},
        "Only events of this action, e.g. CREATE (repeatable).",
    ),
    _query(
        "resource_status",
        {"type": "string"},
        "Only events of this status, e.g. COMPLETE or CREATE_COMPLETE (repeatable).",
    ),
    _query("resource_type", {"type": "string"}, "Only events of resources of this type (repeatable)."),
    _query(
        "sort_keys",
        {"type": "string", "enum": ["event_time", "resource_type"]},
        "Sort by these keys (repeatable or comma-separated; others are ignored, as Heat does). Without "
        "sort_keys and sort_dir, events come oldest first.",
    ),
)
_EVENT_QUERY = (
    *_PAGING,
    *_EVENT_FILTERS,
    _query("resource_name", {"type": "string"}, "Only this resource's events (repeatable)."),
    _query(
        "nested_depth",
        {"type": "integer", "minimum": 0, "maximum": 100},
        "Also the events of nested stacks this many levels down (each links its root stack).",
    ),
)
_LINKS = {"type": "array", "items": _object({"href": {"type": "string"}, "rel": {"type": "string"}})}
_STACK_VIEW = _object(
    {"id": {"type": "string"}, "stack_name": {"type": "string"}, "stack_status": {"type": "string"}}
)
_OUTPUT_VIEW = _object({"output_key": {"type": "string"}, "description": {"type": "string"}})
_RESOURCE_VIEW = _object({"resource_name": {"type": "string"}, "resource_status": {"type": "string"}})
_EVENT_VIEW = _object({"id": {"type": "string"}, "resource_status": {"type": "string"}})
_ANY_OBJECT: Json = {"type": "object"}
_OBSERVATION = _object(
    {
        "enabled": {"type": "boolean"},
        "interval": {"type": ["number", "null"]},
        "heal": {"type": "boolean"},
        "last_cycle_at": {"type": ["string", "null"], "format": "date-time"},
        "drifted": {
            "type": "array",
            "items": _object(
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
_GRAPH = _object(
    {
        "graph": _object(
            {
                "stack": _STACK_VIEW,
                "cursor": {"type": "integer", "description": "Stream from here: .../stream?after=cursor."},
                "nodes": {
                    "type": "array",
                    "items": _object(
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
                    "items": _object({"from": {"type": "string"}, "to": {"type": "string"}}),
                    "description": "One per dependency: `to` requires `from`.",
                },
                "layout": _object(
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
                            "items": _object(
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
_ABANDON_DATA = _object(
    {
        "id": {"type": "string"},
        "name": {"type": "string"},
        "template": {"type": "object"},
        "resources": {
            "type": "object",
            "additionalProperties": _object({"resource_id": {"type": "string"}, "type": {"type": "string"}}),
        },
    }
)
_ACTION_BODY: Json = {
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
_SIGNAL_BODY = _object(
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
_SNAPSHOT = _object(
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
_SOFTWARE_CONFIG = _object(
    {
        "id": {"type": "string", "format": "uuid"},
        "name": {"type": "string"},
        "group": {"type": "string", "description": "The tool that runs it (default Heat::Ungrouped)."},
        "config": {
            "type": ["string", "object", "null"],
            "description": "Script or manifest (a map: structured).",
        },
        "inputs": {"type": "array", "items": {"type": "object"}},
        "outputs": {"type": "array", "items": {"type": "object"}},
        "options": {"type": "object"},
        "creation_time": {"type": "string", "format": "date-time"},
    }
)
_SOFTWARE_CONFIG_BODY = _object(
    {
        "name": {"type": "string", "maxLength": 255},
        "group": {"type": "string", "maxLength": 255},
        "config": {
            "type": ["string", "object", "null"],
            "description": "At most CONVERGE_MAX_SOFTWARE_CONFIG_BYTES (default 1 MiB); more is 413.",
        },
        "inputs": {
            "type": "array",
            "items": {"type": "object"},
            "description": "Each: name, description, type, default, replace_on_change.",
        },
        "outputs": {
            "type": "array",
            "items": {"type": "object"},
            "description": "Each: name, description, type, error_output.",
        },
        "options": {"type": "object"},
    },
    required=("name",),
)
_SNAPSHOT_BODY = _object(
    {"name": {"type": ["string", "null"], "maxLength": 255, "description": "The snapshot's name."}}
)
_MARK_UNHEALTHY_BODY = _object(
    {
        "mark_unhealthy": {"type": "boolean"},
        "resource_status_reason": {"type": "string", "maxLength": 1000},
    },
    required=("mark_unhealthy",),
)
_VERSIONS = _list_of(
    "versions",
    _object({"id": {"type": "string"}, "status": {"type": "string"}, "links": {"type": "array"}}),
)
_HEAT_ERROR = _object(
    {
        "explanation": {"type": "string"},
        "code": {"type": "integer"},
        "title": {"type": "string"},
        "error": _object(
            {"message": {"type": "string"}, "type": {"type": "string"}, "traceback": {"type": "null"}},
            required=("message", "type", "traceback"),
        ),
    },
    required=("explanation", "code", "title", "error"),
)
_REDIRECT = {
    "302": {
        "description": "Found: the stack's canonical URL, stacks/{stack_name}/{stack_id}[/sub-path].",
        "headers": {"Location": {"schema": {"type": "string"}}},
    }
}


def _components() -> Json:
    path_params = {
        "project_id": "The project (tenant) id; must be the token's project unless the token is admin.",
        "stack_name": "The stack's name.",
        "stack_id": "The stack's id (a UUID).",
        "stack_identity": "A stack's name or id; answered with a redirect to its canonical URL.",
        "resource_name": "The resource's logical name in the template.",
        "event_id": "The event's id (a UUID).",
        "output_key": "An output's name in the template.",
        "type_name": "A resource type, e.g. OS::Heat::TestResource.",
        "version": "A template version, e.g. heat_template_version.2016-10-14.",
        "config_id": "A software config's id (a UUID).",
        "deployment_id": "A software deployment's id (a UUID).",
        "server_id": "The id of a server deployed to.",
        "snapshot_id": "A snapshot's id (a UUID).",
    }
    return {
        "securitySchemes": {"XAuthToken": {"type": "apiKey", "in": "header", "name": "X-Auth-Token"}},
        "parameters": {name: _path_param(name, text) for name, text in path_params.items()},
        "schemas": {"HeatError": _HEAT_ERROR, "StackBody": StackBody.model_json_schema()},
        "responses": {
            f"Error{code}": _json(_ref("schemas", "HeatError"), text)
            for code, text in _ERROR_DESCRIPTIONS.items()
        },
    }


def _service_paths() -> Json:
    def plain(summary: str, description: str, content_type: str = "application/json") -> Json:
        ok = {"description": description, "content": {content_type: {"schema": {}}}}
        return {"get": _operation(summary, {"200": ok}, tag="service", v1=False)}

    versions = {
        "get": _operation(
            "Heat's version document (no token needed)",
            {"200": _json(_VERSIONS, "The API versions.")},
            tag="service",
            v1=False,
        )
    }
    ready = plain("Readiness: every named check is true", "Ready.")
    ready["get"]["responses"]["503"] = _json(_ANY_OBJECT, "Not ready, naming the failing checks.")
    return {
        "/healthz": plain("Liveness: the event loop answers", "Alive."),
        "/readyz": ready,
        "/metrics": plain("Prometheus metrics", "Text exposition format.", "text/plain"),
        "/openapi.json": plain("This document", "The OpenAPI document."),
        "/": {
            "get": _operation(
                "The web dashboard's page (no data; it signs in with a token); Heat's version "
                "document for a client that prefers JSON",
                {
                    "200": {"description": "HTML.", "content": {"text/html": {"schema": {}}}},
                    "300": _json(_VERSIONS, "The version document (Accept: application/json)."),
                },
                tag="service",
                v1=False,
            )
        },
        "/v1": versions,
        "/v1/": versions,
        "/healthcheck": {
            "get": _operation(
                "Health as Heat's API reports it (oslo.middleware healthcheck); HEAD answers 204 or 503",
                {
                    "200": {
                        "description": "Taking work: OK (text/plain, application/json or text/html).",
                        "content": {kind: {"schema": {}} for kind in ("text/plain", "application/json")},
                    },
                    "503": {
                        "description": "Not taking work (draining); the reasons.",
                        "content": {kind: {"schema": {}} for kind in ("text/plain", "application/json")},
                    },
                },
                tag="service",
                v1=False,
            )
        },
        "/dashboard/{file}": {
            "get": {
                **_operation(
                    "A file of the web dashboard (HTML, CSS, JavaScript modules)",
                    {
                        "200": {"description": "The file.", "content": {"*/*": {"schema": {}}}},
                        "404": _ref("responses", "Error404"),
                    },
                    tag="service",
                    v1=False,
                ),
                "parameters": [_path_param("file", "A file name, e.g. app.js.")],
            }
        },
        "/favicon.ico": {
            "get": _operation(
                "The dashboard's icon: a redirect to /dashboard/favicon.svg",
                {"301": {"description": "Moved to /dashboard/favicon.svg."}},
                tag="service",
                v1=False,
            )
        },
    }


def _catalog_paths() -> Json:
    def get(summary: str, ok: Json, *, params: tuple[str, ...], query: tuple[Json, ...] = ()) -> Json:
        return {
            "get": _operation(summary, {"200": _json(ok, "OK.")}, params=params, query=query, tag="catalog")
        }

    v1 = "/v1/{project_id}"
    return {
        f"{v1}/resource_types": get(
            "List resource types",
            _list_of("resource_types", {}),
            params=("project_id",),
            query=(
                _query("name", {"type": "string"}, "Only types whose name contains this text."),
                _bool_query("with_description", "Give each type's description too."),
            ),
        ),
        f"{v1}/resource_types/{{type_name}}": get(
            "Show a resource type's schema", _ANY_OBJECT, params=("project_id", "type_name")
        ),
        f"{v1}/resource_types/{{type_name}}/template": get(
            "A template using a resource type",
            _ANY_OBJECT,
            params=("project_id", "type_name"),
            query=(_query("template_type", {"type": "string", "enum": ["hot"]}, "Only hot is produced."),),
        ),
        f"{v1}/template_versions": get(
            "List template versions", _list_of("template_versions", _ANY_OBJECT), params=("project_id",)
        ),
        f"{v1}/template_versions/{{version}}/functions": get(
            "List a template version's functions",
            _list_of("template_functions", _ANY_OBJECT),
            params=("project_id", "version"),
            query=(_bool_query("with_condition_func", "Include the condition functions."),),
        ),
        f"{v1}/validate": {
            "post": _operation(
                "Validate a template",
                {"200": _json(_ANY_OBJECT, "Its description and parameters.")},
                params=("project_id",),
                body=_ref("schemas", "StackBody"),
                tag="catalog",
            )
        },
        f"{v1}/build_info": get(
            "What is running: the API's and the engine's revision (Converge's version)",
            _object(
                {
                    "api": _object({"revision": {"type": "string"}}),
                    "engine": _object({"revision": {"type": "string"}}),
                }
            ),
            params=("project_id",),
        ),
    }


def _stack_paths() -> Json:
    stacks = "/v1/{project_id}/stacks"
    one = f"{stacks}/{{stack_name}}/{{stack_id}}"
    body = _ref("schemas", "StackBody")
    accepted = {"202": {"description": "Accepted: the update runs in the background."}}

    def get(
        summary: str, ok: Json, *, params: tuple[str, ...] = _STACK, errors: tuple[int, ...] = ()
    ) -> Json:
        return {"get": _operation(summary, {"200": _json(ok, "OK.")}, params=params, errors=errors)}

    redirect = {  # also with any sub-path after the name or id: the redirect keeps it
        method: _operation(f"{method.upper()} by name or id alone", _REDIRECT, params=_IDENTITY)
        for method in ("get", "put", "patch", "delete")
    }
    return {
        stacks: {
            "get": _operation(
                "List stacks",
                {"200": _json(_list_of("stacks", _STACK_VIEW), "OK.")},
                params=("project_id",),
                query=_STACK_LIST_QUERY,
            ),
            "post": _operation(
                "Create a stack",
                {
                    "201": {
                        **_json(
                            _object({"stack": _object({"id": {"type": "string"}, "links": _LINKS})}),
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
            "post": _operation(
                "Preview a create: the stack and resources it would make, changing nothing",
                {"200": _json(_object({"stack": _STACK_VIEW}), "OK.")},
                params=("project_id",),
                body=body,
            )
        },
        f"{stacks}/{{stack_identity}}": redirect,
        one: {
            "get": _operation(
                "Show a stack", {"200": _json(_object({"stack": _STACK_VIEW}), "OK.")}, params=_STACK
            ),
            "put": _operation("Update a stack", accepted, params=_STACK, body=body, errors=(409,)),
            "patch": _operation(
                "Update a stack, keeping what is omitted", accepted, params=_STACK, body=body, errors=(409,)
            ),
            "delete": _operation(
                "Delete a stack", {"204": {"description": "Deleting."}}, params=_STACK, errors=(409,)
            ),
        },
        f"{one}/template": get("The current template", _ANY_OBJECT, errors=(409,)),
        f"{one}/template/source": get(
            "Converge extension: the current template's text as it was sent (comments kept); a "
            "template sent as an object is given as JSON text, with as_sent false",
            _object({"source": {"type": "string"}, "as_sent": {"type": "boolean"}}),
            errors=(409,),
        ),
        f"{one}/environment": get("The current environment", _ANY_OBJECT, errors=(409,)),
        f"{one}/files": get("The current files", _ANY_OBJECT, errors=(409,)),
        f"{one}/outputs": get("List outputs", _list_of("outputs", _OUTPUT_VIEW)),
        f"{one}/outputs/{{output_key}}": get(
            "Show an output", _object({"output": _ANY_OBJECT}), params=(*_STACK, "output_key")
        ),
        f"{one}/preview": {
            "put": _operation(
                "Preview an update: added, deleted, replaced, updated, unchanged resources",
                {"200": _json(_object({"resource_changes": _ANY_OBJECT}), "OK.")},
                params=_STACK,
                body=body,
                errors=(409,),
            )
        },
        f"{one}/actions": {
            "post": _operation(
                "Run a stack action: cancel the operation in progress, or check, suspend, resume",
                {"200": {"description": "Started."}},
                params=_STACK,
                body=_ACTION_BODY,
                errors=(409,),
            )
        },
        f"{one}/observation": get(
            "Observation of the stack: settings, last round, and the drift that exists now",
            _object({"observation": _OBSERVATION}),
        ),
        f"{one}/graph": get(
            "Converge extension: the stack's resources as a dependency graph, for the dashboard",
            _GRAPH,
        ),
        f"{one}/stream": {
            "get": _operation(
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
                params=_STACK,
                query=(
                    _query("after", {"type": "integer", "minimum": 0}, "Send the events after this cursor."),
                ),
                errors=(429,),
            )
        },
        f"{one}/abandon": {
            "delete": _operation(
                "Abandon a stack: forget it, leaving its resources; returns the data adopt needs",
                {"200": _json(_ABANDON_DATA, "The abandon document (pass it as adopt_stack_data).")},
                params=_STACK,
                errors=(409,),
            )
        },
        f"{one}/export": get(
            "Export a stack: what abandon would return, changing nothing", _ABANDON_DATA, errors=(409,)
        ),
        f"{one}/snapshots": {
            "get": _operation(
                "List the stack's snapshots",
                {"200": _json(_list_of("snapshots", _SNAPSHOT), "OK.")},
                params=_STACK,
            ),
            "post": _operation(
                "Snapshot the stack (stack action SNAPSHOT): its template, environment, files, "
                "parameters and resources, with each snapshot-taking type's own snapshot",
                {"200": _json(_SNAPSHOT, "The snapshot, IN_PROGRESS until the SNAPSHOT action ends.")},
                params=_STACK,
                body=_SNAPSHOT_BODY,
                errors=(409,),
            ),
        },
        f"{one}/snapshots/{{snapshot_id}}": {
            "get": _operation(
                "Show a snapshot",
                {"200": _json(_object({"snapshot": _SNAPSHOT}), "OK.")},
                params=(*_STACK, "snapshot_id"),
            ),
            "delete": _operation(
                "Delete a snapshot (not one in progress)",
                {"204": {"description": "Deleted."}},
                params=(*_STACK, "snapshot_id"),
            ),
        },
        f"{one}/snapshots/{{snapshot_id}}/restore": {
            "post": _operation(
                "Restore the stack to a complete snapshot: an update back to it (stack action RESTORE)",
                {"202": {"description": "Accepted: the restore runs in the background."}},
                params=(*_STACK, "snapshot_id"),
                errors=(409,),
            )
        },
        **_resource_paths(one, get),
    }


def _resource_paths(one: str, get: Callable[..., Json]) -> Json:
    resource = f"{one}/resources/{{resource_name}}"
    events = _list_of("events", _EVENT_VIEW)
    event = _object({"event": _EVENT_VIEW})
    return {
        f"{one}/resources": {
            "get": _operation(
                "List resources",
                {"200": _json(_list_of("resources", _RESOURCE_VIEW), "OK.")},
                params=_STACK,
                query=(
                    _query("type", {"type": "string"}, "Only resources of this type (repeatable)."),
                    _query("name", {"type": "string"}, "Only resources of this name (repeatable)."),
                    _query("status", {"type": "string"}, "Only resources in this status (repeatable)."),
                    _query(
                        "nested_depth",
                        {"type": "integer", "minimum": 0, "maximum": 100},
                        "Also list resources of nested stacks this many levels down.",
                    ),
                    _query(
                        "limit",
                        {"type": "integer", "minimum": 0, "maximum": 1000},
                        "Converge extension: at most this many resources, in name order (all when absent).",
                    ),
                    _query(
                        "marker", {"type": "string"}, "With limit: start after the resource of this name."
                    ),
                ),
            )
        },
        resource: {
            **get("Show a resource", _object({"resource": _RESOURCE_VIEW}), params=_RESOURCE),
            "patch": _operation(
                "Mark a resource unhealthy (or healthy again)",
                {"200": _json(_ANY_OBJECT, "Marked.")},
                params=_RESOURCE,
                body=_MARK_UNHEALTHY_BODY,
                errors=(409,),
            ),
        },
        f"{resource}/metadata": get(
            "A resource's metadata", _object({"metadata": _ANY_OBJECT}), params=_RESOURCE
        ),
        f"{resource}/signal": {
            "post": _operation(
                "Signal a wait-condition handle (the X-Auth-Token may be the handle's own token), or "
                "clear the hook a resource is paused at (unset_hook)",
                {"200": {"description": "Signalled."}},
                params=_RESOURCE,
                body=_SIGNAL_BODY,
                errors=(409, 413),
            )
        },
        f"{resource}/events": {
            "get": _operation(
                "List a resource's events (404 when it has none, as Heat)",
                {"200": _json(events, "OK.")},
                params=_RESOURCE,
                query=(*_PAGING, *_EVENT_FILTERS),
            )
        },
        f"{resource}/events/{{event_id}}": get("Show an event", event, params=(*_RESOURCE, "event_id")),
        f"{one}/events": {
            "get": _operation("List events", {"200": _json(events, "OK.")}, params=_STACK, query=_EVENT_QUERY)
        },
        f"{one}/events/{{event_id}}": get("Show an event", event, params=(*_STACK, "event_id")),
    }


def _software_config_paths() -> Json:
    configs = "/v1/{project_id}/software_configs"
    one = ("project_id", "config_id")
    shown = _json(_object({"software_config": _SOFTWARE_CONFIG}), "The config.")
    return {
        configs: {
            "get": _operation(
                "List the project's software configs, oldest first (id, name, group, creation_time)",
                {"200": _json(_list_of("software_configs", _SOFTWARE_CONFIG), "OK.")},
                params=("project_id",),
                query=_PAGING[:2],
                tag="software",
            ),
            "post": _operation(
                "Create a software config",
                {"200": shown},
                params=("project_id",),
                body=_SOFTWARE_CONFIG_BODY,
                errors=(413,),
                tag="software",
            ),
        },
        f"{configs}/{{config_id}}": {
            "get": _operation("Show a software config", {"200": shown}, params=one, tag="software"),
            "delete": _operation(
                "Delete a software config", {"204": {"description": "Deleted."}}, params=one, tag="software"
            ),
        },
    }


_SOFTWARE_DEPLOYMENT = _object(
    {
        "id": {"type": "string", "format": "uuid"},
        "config_id": {"type": "string", "format": "uuid", "description": "The config the server runs."},
        "server_id": {"type": "string"},
        "input_values": {"type": "object"},
        "output_values": {"type": "object", "description": "What the server's agent reported."},
        "action": {"type": "string", "enum": ["INIT", "CREATE", "UPDATE", "DELETE", "SUSPEND", "RESUME"]},
        "status": {"type": "string", "enum": ["IN_PROGRESS", "COMPLETE", "FAILED"]},
        "status_reason": {"type": "string"},
        "creation_time": {"type": "string", "format": "date-time"},
        "updated_time": {"type": ["string", "null"], "format": "date-time"},
    }
)


def _software_deployment_paths() -> Json:
    deployments = "/v1/{project_id}/software_deployments"
    one = ("project_id", "deployment_id")
    shown = _json(_object({"software_deployment": _SOFTWARE_DEPLOYMENT}), "The deployment.")
    return {
        deployments: {
            "get": _operation(
                "List the project's software deployments (to one server with server_id), oldest first",
                {"200": _json(_list_of("software_deployments", _SOFTWARE_DEPLOYMENT), "OK.")},
                params=("project_id",),
                query=(_query("server_id", {"type": "string"}, "Only the deployments to this server."),),
                tag="software",
            ),
            "post": _operation(
                "Create a software deployment of a config to a server",
                {"200": shown},
                params=("project_id",),
                body=_SOFTWARE_DEPLOYMENT,
                tag="software",
            ),
        },
        f"{deployments}/metadata/{{server_id}}": {
            "get": _operation(
                "The derived configs a server's agent runs (a project token, or the server's agent token)",
                {"200": _json(_list_of("metadata", _SOFTWARE_CONFIG), "OK.")},
                params=("project_id", "server_id"),
                tag="software",
            )
        },
        f"{deployments}/{{deployment_id}}": {
            "get": _operation("Show a software deployment", {"200": shown}, params=one, tag="software"),
            "put": _operation(
                "Update a software deployment; a final status on one in progress is its server's signal "
                "(a project token, or the server's agent token)",
                {"200": shown},
                params=one,
                body=_SOFTWARE_DEPLOYMENT,
                tag="software",
            ),
            "delete": _operation(
                "Delete a software deployment",
                {"204": {"description": "Deleted."}},
                params=one,
                tag="software",
            ),
        },
    }


def _unsupported_paths() -> Json:
    """Heat endpoints Converge does not implement: each answers 501 naming what."""
    paths: Json = {}
    for method, path, what in [(u.method, u.path, u.what) for u in UNSUPPORTED]:
        params = tuple(re.findall(r"\{(\w+)\}", path))
        paths.setdefault(path, {})[method.lower()] = _operation(
            f"Not supported by Converge: {what}",
            {},
            params=params,
            errors=(501,),
            tag="unsupported",
        )
    return paths


def openapi_document() -> Json:
    """The whole document, rebuilt on each call (it is small); pure."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Converge engine API",
            "version": "1",
            "description": "OpenStack Heat v1 compatible orchestration API, plus health and metrics.",
        },
        "tags": [
            {
                "name": "service",
                "description": "Health, readiness, metrics, this document and the web dashboard.",
            },
            {"name": "stacks", "description": "Stacks, their resources, events and outputs."},
            {"name": "catalog", "description": "Resource types, template versions, validation."},
            {"name": "software", "description": "Software configs (what servers are configured with)."},
            {"name": "unsupported", "description": "Heat endpoints Converge does not implement (501)."},
        ],
        "paths": {
            **_service_paths(),
            **_stack_paths(),
            **_catalog_paths(),
            **_software_config_paths(),
            **_software_deployment_paths(),
            **_unsupported_paths(),
        },
        "components": _components(),
    }


def openapi_route() -> web.RouteDef:
    """GET /openapi.json, needing no token."""
    document = openapi_document()

    async def serve(_: web.Request) -> web.Response:
        return json_response(document)

    return web.get("/openapi.json", serve)
