"""Heat v1 routes under one stack: resources (list, show, metadata, signal,
mark unhealthy) and events (per stack and per resource, paged).

A signal may come with a wait-condition handle's token instead of a project
token; then every failure (no such resource, not a handle, wrong token) is
the same 401, so the caller learns nothing about what exists. An event
marker is looked up among the events being listed only.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

from aiohttp import web

from services.engine.api.auth import AUTH_REQUIRED, PRINCIPAL
from services.engine.api.deps import ApiDeps
from services.engine.api.errors import bad_request, not_found, unauthorized
from services.engine.api.requests import query_values, read_json, storable_text
from services.engine.api.views import HIDDEN, event_view, json_response, resource_view
from services.engine.core.model import StackId
from services.engine.signals import Unauthorized
from services.engine.store.queries import NestedStack, StackView

MAX_EVENTS = 1000
MAX_NESTED_DEPTH = 100


def is_signal(method: str, rest: list[str]) -> bool:
    """Whether `rest` (the path under a stack) is a resource signal."""
    return method == "POST" and len(rest) == 3 and rest[0] == "resources" and rest[2] == "signal"


def _base(request: web.Request) -> str:
    return f"{request.url.origin()}/v1/{request.match_info['project']}"


async def dispatch(
    deps: ApiDeps, request: web.Request, stack: StackView, rest: list[str]
) -> web.StreamResponse:
    method = request.method
    if rest == ["events"] and method == "GET":
        return await events(deps, request, stack, None)
    if rest[0] == "events" and len(rest) == 2 and method == "GET":
        return await event(deps, request, stack, rest[1])
    if rest == ["resources"] and method == "GET":
        return await list_resources(deps, request, stack)
    if is_signal(method, rest):
        return await signal(deps, request, stack, rest[1])
    if PRINCIPAL not in request:
        raise unauthorized(AUTH_REQUIRED)
    if len(rest) >= 2 and rest[0] == "resources":
        name, tail = rest[1], rest[2:]
        row = await deps.queries.resource(stack.stack_id, name)
        if row is None:
            raise not_found(f"The Resource ({name}) could not be found.")
        if not tail and method == "GET":
            view = resource_view(dict(row), stack, _base(request), detail=True)
            view["properties"] = await _shown_properties(deps, stack, row["properties"])
            return json_response({"resource": view})
        if not tail and method == "PATCH":
            return await mark_unhealthy(deps, request, stack, row["resource_id"], name)
        if tail == ["metadata"] and method == "GET":
            return json_response({"metadata": {}})
        if tail == ["signal"] and method == "POST":
            return await signal(deps, request, stack, name)
        if tail and tail[0] == "events" and method == "GET":
            if len(tail) == 2:
                return await event(deps, request, stack, tail[1])
            return await events(deps, request, stack, name)
    raise not_found(f"no such path under stack {stack.name}: /{'/'.join(rest)}")


async def _shown_properties(deps: ApiDeps, stack: StackView, properties: Any) -> dict[str, Any]:
    """The properties last applied (a Converge addition to Heat's shape), with every value
    that came from a hidden parameter masked as the stack's parameters are."""
    if not isinstance(properties, dict):
        return {}
    definition = await deps.current_definition(stack)
    hidden = (
        [definition.parameters[n] for n in definition.hidden_parameters() if n in definition.parameters]
        if definition
        else []
    )
    secrets = {str(v) for v in hidden if v not in (None, "")}
    return {k: _masked(v, secrets) for k, v in properties.items()}


def _masked(value: Any, secrets: set[str]) -> Any:
    if isinstance(value, dict):
        return {k: _masked(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v, secrets) for v in value]
    if isinstance(value, str) and secrets and any(s in value for s in secrets):
        return HIDDEN
    return value


async def signal(deps: ApiDeps, request: web.Request, stack: StackView, name: str) -> web.Response:
    authenticated = PRINCIPAL in request
    token = request.headers.get("X-Auth-Token", "")
    # Without a project token, only the handle's own token gets further than one 401: before
    # the body is read, so neither a bad body nor a large one tells that the stack exists.
    # (No resource name holds a NUL, and PostgreSQL cannot compare one.)
    if not authenticated and not (
        storable_text(name) and await deps.signals.authorizes(StackId(stack.stack_id), name, token)
    ):
        raise unauthorized(AUTH_REQUIRED)
    if not storable_text(name):
        raise not_found(f"The Resource ({name}) could not be found.")
    data = await read_json(request)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise bad_request("the signal body must be a JSON object")
    try:
        await deps.signals.signal(
            StackId(stack.stack_id),
            name,
            data,
            token=token,
            project_token_ok=authenticated,
        )
    except Unauthorized as exc:
        raise unauthorized(AUTH_REQUIRED) from exc
    return web.Response(status=200)


async def list_resources(deps: ApiDeps, request: web.Request, stack: StackView) -> web.Response:
    """The stack's resources; with `nested_depth` N also those of its nested stacks down to
    N levels, each naming the resource that owns its stack (`parent_resource`)."""
    depth = _nested_depth(request)
    tree = await deps.queries.stack_tree(stack.stack_id, depth) if depth else []
    types = request.query.getall("type", [])
    names = request.query.getall("name", [])
    statuses = request.query.getall("status", [])
    base = _base(request)
    views = []
    for nested in tree or [NestedStack(stack.stack_id, stack.name, 0, None)]:
        owner = stack if nested.depth == 0 else replace(stack, stack_id=nested.stack_id, name=nested.name)
        for r in await deps.queries.resources(nested.stack_id):
            if (
                (not types or r["type"] in types)
                and (not names or r["name"] in names)
                and (not statuses or r["status"] in statuses or f"{r['action']}_{r['status']}" in statuses)
            ):
                views.append(resource_view(dict(r), owner, base, parent_resource=nested.parent_resource))
    return json_response({"resources": views})


def _nested_depth(request: web.Request) -> int:
    raw = request.query.get("nested_depth", "0")
    try:
        depth = int(raw)
    except ValueError:
        depth = -1
    if not 0 <= depth <= MAX_NESTED_DEPTH:
        raise bad_request(f"nested_depth must be an integer from 0 to {MAX_NESTED_DEPTH}, not {raw!r}")
    return depth


async def mark_unhealthy(
    deps: ApiDeps, request: web.Request, stack: StackView, resource_id: int, name: str
) -> web.Response:
    body = await read_json(request)
    if not isinstance(body, dict) or not isinstance(body.get("mark_unhealthy"), bool):
        raise bad_request("mark_unhealthy (true or false) is required")
    reason = body.get("resource_status_reason", "")
    if not isinstance(reason, str) or len(reason) > 1000:
        raise bad_request("resource_status_reason must be a string of at most 1000 characters")
    await deps.queries.mark_unhealthy(resource_id, unhealthy=body["mark_unhealthy"], reason=reason)
    return json_response({})


async def events(deps: ApiDeps, request: web.Request, stack: StackView, resource: str | None) -> web.Response:
    q = request.query
    try:
        marker = uuid.UUID(q["marker"]) if "marker" in q else None
        limit = max(0, min(int(q.get("limit", MAX_EVENTS)), MAX_EVENTS))
    except ValueError as exc:
        raise bad_request(f"bad paging parameter: {exc}") from exc
    sort_dir = "desc" if q.get("sort_dir", "asc") == "desc" else "asc"
    depth = _nested_depth(request) if resource is None else 0
    tree = await deps.queries.stack_tree(stack.stack_id, depth) if depth else []
    stacks = {n.stack_id: n for n in tree}
    rows = await deps.queries.events(
        list(stacks) or stack.stack_id,
        resource_name=resource or next(iter(query_values(request, ("resource_name",))), None),
        limit=limit,
        marker=marker,
        sort_dir=sort_dir,
    )
    base = _base(request)
    views = []
    for r in rows:
        nested = stacks.get(r["stack_id"])
        if nested is None or nested.depth == 0:
            views.append(event_view(dict(r), stack, base))
        else:  # an event of a nested stack: its links point there, and it names the root
            view = event_view(dict(r), replace(stack, stack_id=nested.stack_id, name=nested.name), base)
            view["root_stack_id"] = str(stack.stack_id)
            views.append(view)
    return json_response({"events": views})


async def event(deps: ApiDeps, request: web.Request, stack: StackView, event_id: str) -> web.Response:
    try:
        row = await deps.queries.event(stack.stack_id, uuid.UUID(event_id))
    except ValueError:
        row = None
    if row is None:
        raise not_found(f"The Event ({event_id}) could not be found.")
    return json_response({"event": event_view(dict(row), stack, _base(request))})
