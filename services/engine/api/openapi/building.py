"""The pieces every part of the OpenAPI document is built from.

Where it sits: the path modules beside it (`service_paths`, `stack_paths`,
`software_paths`) describe their operations with these helpers, and
`openapi_document` (this package) adds `components`: the token scheme, the
path parameters every operation names by reference, the request body of a
stack (the pydantic `StackBody`, so the document cannot drift from what
`parse_body` accepts) and one response per error code, in Heat's JSON shape
(`errors.error_body`). A /v1 operation (`operation`) needs a token and may
answer 400/401/403/404 as Heat does, whatever its own answers. Pure data.
"""

from __future__ import annotations

from typing import Any

from services.engine.api.requests import StackBody

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


def ref(kind: str, name: str) -> Json:
    return {"$ref": f"#/components/{kind}/{name}"}


def json_content(schema: Json, description: str) -> Json:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def obj(properties: Json, *, required: tuple[str, ...] = ()) -> Json:
    schema: Json = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


def list_of(key: str, item: Json) -> Json:
    return obj({key: {"type": "array", "items": item}}, required=(key,))


def path_param(name: str, description: str) -> Json:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "string", "minLength": 1},
    }


def query_param(name: str, schema: Json, description: str) -> Json:
    return {"name": name, "in": "query", "required": False, "description": description, "schema": schema}


def bool_query(name: str, description: str) -> Json:
    return query_param(name, {"type": "string", "enum": ["true", "false"]}, description)


def operation(
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
    parameters = [ref("parameters", p) for p in params] + list(query)
    if parameters:
        op["parameters"] = parameters
    if body is not None:
        op["requestBody"] = {"required": False, "content": {"application/json": {"schema": body}}}
    if v1:
        op["security"] = [{"XAuthToken": []}]
        for code in sorted({*_V1_ERRORS, *errors}):
            op["responses"][str(code)] = ref("responses", f"Error{code}")
    return op


# -- reusable parts -----------------------------------------------------------

PAGING = (
    query_param("limit", {"type": "integer", "minimum": 0}, "At most this many items (capped at 1000)."),
    query_param("marker", {"type": "string", "format": "uuid"}, "Start after the item with this id."),
    query_param("sort_dir", {"type": "string", "enum": ["asc", "desc"]}, "Sort direction."),
)
ANY_OBJECT: Json = {"type": "object"}
_HEAT_ERROR = obj(
    {
        "explanation": {"type": "string"},
        "code": {"type": "integer"},
        "title": {"type": "string"},
        "error": obj(
            {"message": {"type": "string"}, "type": {"type": "string"}, "traceback": {"type": "null"}},
            required=("message", "type", "traceback"),
        ),
    },
    required=("explanation", "code", "title", "error"),
)


def components() -> Json:
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
        "signal_token": "The token a deployment's signal URL carries (TEMP_URL_SIGNAL), drawn for one run.",
        "snapshot_id": "A snapshot's id (a UUID).",
    }
    return {
        "securitySchemes": {"XAuthToken": {"type": "apiKey", "in": "header", "name": "X-Auth-Token"}},
        "parameters": {name: path_param(name, text) for name, text in path_params.items()},
        "schemas": {"HeatError": _HEAT_ERROR, "StackBody": StackBody.model_json_schema()},
        "responses": {
            f"Error{code}": json_content(ref("schemas", "HeatError"), text)
            for code, text in _ERROR_DESCRIPTIONS.items()
        },
    }
