"""Heat v1 routes under one stack: resources (list, show, metadata, signal,
mark unhealthy; Converge's summary, `api.summaries`) and events (per stack and
per resource, paged).

Reads cost what they return, not the stack's size squared: a resource is
looked up by (stack, name); a list is read a page (`RESOURCE_PAGE` rows, an
index range scan) at a time and streamed out, each resource's `required_by`
coming from one pass over the stack's dependencies per request. Each read
statement holds a connection only while it runs, and one project's reads
hold at most `ApiDeps.reads` connections at once. Every value shown goes
through the stack's `Secrets` (hidden parameters).

A signal may come with a wait-condition handle's token instead of a project
token; then every failure (no such resource, not a handle, wrong token) is
the same 401, so the caller learns nothing about what exists. An event
marker is looked up among the events being listed only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncGenerator
from dataclasses import replace
from typing import Any

import structlog
from aiohttp import web

from services.engine.api.auth import AUTH_REQUIRED, PRINCIPAL
from services.engine.api.deps import ApiDeps
from services.engine.api.errors import bad_request, not_found, too_large, unauthorized
from services.engine.api.masking import NO_SECRETS, Secrets
from services.engine.api.requests import check_storable, query_values, read_json, storable_text
from services.engine.api.summaries import show_summary
from services.engine.api.views import event_view, json_response, resource_view, stack_path
from services.engine.core.model import StackId
from services.engine.marks import mark_unhealthy as mark
from services.engine.signals import Unauthorized
from services.engine.store import Record
from services.engine.store.queries import EventFilter, NestedStack, ResourceFilters, ResourceKey, StackView
from shared.errors import ConvergeError, InvalidInput

log = structlog.get_logger(__name__)

MAX_EVENTS = 1000
MAX_NESTED_DEPTH = 100
#: The most `limit` may ask for.
MAX_LIMIT = 1000
#: Rows per read statement of a whole resource list.
RESOURCE_PAGE = 500
#: Views built and written at a time: a millisecond or two of the event loop each.
WRITE_CHUNK = 50
#: After the last name there is: a marker's page starts after every row with that name.
_LAST_ID = 2**63 - 1


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
        if not tail and method == "GET":
            return await show_resource(deps, request, stack, name)
        if not tail and method == "PATCH":
            return await mark_unhealthy(deps, request, stack, name)
        if tail == ["summary"] and method == "GET":
            return await show_summary(deps, stack, name)
        if tail == ["metadata"] and method == "GET":
            async with deps.reads.slot(stack.project_id):
                found = await deps.queries.resource(stack.stack_id, name)
            if found is None:
                raise not_found(f"The Resource ({name}) could not be found.")
            secrets = await deps.secrets.for_stack(stack.stack_id)
            return json_response({"metadata": secrets.mask(found["metadata"] or {})})
        if tail and tail[0] == "events" and method == "GET":
            if len(tail) == 2:
                return await event(deps, request, stack, tail[1], name)
            return await events(deps, request, stack, name)
    raise not_found(f"no such path under stack {stack.name}: /{'/'.join(rest)}")


async def show_resource(deps: ApiDeps, request: web.Request, stack: StackView, name: str) -> web.Response:
    """One resource: two statements (its row by name, then who requires it), whatever the
    stack's size. Properties (a Converge addition to Heat's shape) and attributes are
    shown with values from hidden parameters masked."""
    async with deps.reads.slot(stack.project_id):
        row = await deps.queries.resource(stack.stack_id, name)
        if row is None:
            raise not_found(f"The Resource ({name}) could not be found.")
        required = await deps.queries.required_by(stack.stack_id, [row["resource_id"]])
    secrets = await deps.secrets.for_stack(stack.stack_id)
    required_by = required.get(row["resource_id"], ())
    view = resource_view(row, stack, _base(request), detail=True, required_by=required_by, secrets=secrets)
    properties = row["properties"]
    view["properties"] = secrets.mask(properties) if isinstance(properties, dict) else {}
    return json_response({"resource": view})


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
    data = await signal_body(request, deps.api_limits.signal_bytes)
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


async def signal_body(request: web.Request, limit: int) -> Any:
    """The signal's JSON body (None when empty), read only up to `limit` bytes: a larger
    one is refused (413) as soon as its size is known, not after it was buffered."""
    too_big = f"a signal body may be at most {limit} bytes (CONVERGE_MAX_SIGNAL_BYTES)"
    declared = request.content_length
    if declared is not None and declared > limit:
        raise too_large(f"{too_big}; this one is {declared}", limit=limit, size=declared)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > limit:
            raise too_large(f"{too_big}; this one is larger", limit=limit, size=size)
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        return None
    try:
        data = json.loads(raw)
    except RecursionError as exc:
        raise InvalidInput("the request body is nested too deeply") from exc
    except ValueError as exc:  # also UnicodeDecodeError
        raise InvalidInput(f"the request body is not valid JSON: {exc}") from exc
    check_storable(data, "")
    return data


async def list_resources(deps: ApiDeps, request: web.Request, stack: StackView) -> web.StreamResponse:
    """The stack's resources; with `nested_depth` N also those of its nested stacks down to
    N levels, each naming the resource that owns its stack (`parent_resource`). Converge
    extension: `limit` (and `marker`, a resource name) pages one stack's resources in
    name order; without it every resource is listed, streamed a page at a time."""
    depth = _nested_depth(request)
    filters: ResourceFilters = {
        "names": query_values(request, ("name",)),
        "types": query_values(request, ("type",)),
        "statuses": query_values(request, ("status",)),
    }
    limit, marker = _resource_paging(request)
    if limit is not None and depth:
        raise bad_request(
            "limit and marker page one stack's resources: they cannot be used with nested_depth"
        )
    tree = await deps.queries.stack_tree(stack.stack_id, depth) if depth else []
    if tree:
        secrets = await deps.secrets.for_stacks([n.stack_id for n in tree])
    else:
        tree = [NestedStack(stack.stack_id, stack.name, 0, None)]
        secrets = {stack.stack_id: await deps.secrets.for_view(stack)}
    base = _base(request)
    if limit is not None:
        after = (marker, _LAST_ID) if marker is not None else None
        async with deps.reads.slot(stack.project_id):
            rows = await deps.queries.resources(
                stack.stack_id, after=after, limit=limit, with_required_by=True, **filters
            )
        shown = secrets.get(stack.stack_id, NO_SECRETS)
        return json_response({"resources": [resource_view(r, stack, base, secrets=shown) for r in rows]})
    return await _stream_all(deps, request, stack, tree, filters, secrets, base)


async def _stream_all(
    deps: ApiDeps,
    request: web.Request,
    stack: StackView,
    tree: list[NestedStack],
    filters: ResourceFilters,
    secrets: dict[uuid.UUID, Secrets],
    base: str,
) -> web.StreamResponse:
    """Every resource of the tree as one JSON document, written a page at a time: memory
    and connection use stay one page's (and one map of the stack's reverse edges),
    whatever the stack's size (`_stack_pages`). The whole list holds one of the
    project's read slots, and writes in chunks that leave the event loop to others in
    between: many big lists of one project queue behind each other instead of holding
    up the other projects."""
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    separator = b""
    async with deps.reads.slot(stack.project_id):
        for nested in tree:
            owner = stack if nested.depth == 0 else replace(stack, stack_id=nested.stack_id, name=nested.name)
            shown = secrets.get(nested.stack_id, NO_SECRETS)
            try:
                async with contextlib.aclosing(_stack_pages(deps, nested.stack_id, filters)) as pages:
                    async for edges, rows in pages:
                        if not response.prepared:
                            await response.prepare(request)
                            await response.write(b'{"resources":[')
                        for start in range(0, len(rows), WRITE_CHUNK):
                            text = ",".join(
                                json.dumps(
                                    resource_view(
                                        row,
                                        owner,
                                        base,
                                        parent_resource=nested.parent_resource,
                                        required_by=edges.get(row["resource_id"], ()),
                                        secrets=shown,
                                    ),
                                    separators=(",", ":"),
                                )
                                for row in rows[start : start + WRITE_CHUNK]
                            )
                            await response.write(separator + text.encode())
                            separator = b","
                            await asyncio.sleep(0)  # others' turn between chunks: the loop is shared
            except ConvergeError as exc:
                if not response.prepared:
                    raise  # nothing sent yet: the error middleware answers in Heat's shape
                log.warning("resource_list_cut", stack_id=str(stack.stack_id), error=str(exc))
                response.force_close()
                return response
    if not response.prepared:
        await response.prepare(request)
        await response.write(b'{"resources":[')
    await response.write(b"]}")
    await response.write_eof()
    return response


async def _stack_pages(
    deps: ApiDeps, stack_id: uuid.UUID, filters: ResourceFilters
) -> AsyncGenerator[tuple[dict[int, tuple[str, ...]], list[Record]], None]:
    """Every page of one stack's rows, each with the stack's reverse edges: those in one
    pass first, then the pages on one `by_index` transaction, a round trip each. One
    connection is held at a time, so lists running at once cannot hold the whole pool
    while each waits for a second connection."""
    edges = await deps.queries.required_by(stack_id)
    after: ResourceKey | None = None
    async with deps.queries.by_index() as reads:
        while True:
            rows = await deps.queries.resources(
                stack_id, after=after, limit=RESOURCE_PAGE, within=reads, **filters
            )
            yield edges, rows
            if len(rows) < RESOURCE_PAGE:
                return
            after = (rows[-1]["name"], rows[-1]["resource_id"])


def _resource_paging(request: web.Request) -> tuple[int | None, str | None]:
    raw = request.query.get("limit")
    marker = request.query.get("marker")
    if raw is None:
        if marker is not None:
            raise bad_request("marker pages the resources with limit: give limit too")
        return None, None
    try:
        limit = int(raw)
    except ValueError:
        limit = -1
    if not 0 <= limit <= MAX_LIMIT:
        raise bad_request(f"limit must be an integer from 0 to {MAX_LIMIT}, not {raw!r}")
    if marker is not None and not storable_text(marker):
        raise bad_request("marker must be a resource name")
    return limit, marker


def _nested_depth(request: web.Request) -> int:
    raw = request.query.get("nested_depth", "0")
    try:
        depth = int(raw)
    except ValueError:
        depth = -1
    if not 0 <= depth <= MAX_NESTED_DEPTH:
        raise bad_request(f"nested_depth must be an integer from 0 to {MAX_NESTED_DEPTH}, not {raw!r}")
    return depth


async def mark_unhealthy(deps: ApiDeps, request: web.Request, stack: StackView, name: str) -> web.Response:
    body = await read_json(request)
    if not isinstance(body, dict) or not isinstance(body.get("mark_unhealthy"), bool):
        raise bad_request("mark_unhealthy (true or false) is required")
    reason = body.get("resource_status_reason", "")
    if not isinstance(reason, str) or len(reason) > 1000:
        raise bad_request("resource_status_reason must be a string of at most 1000 characters")
    await mark(deps.store, StackId(stack.stack_id), name, unhealthy=body["mark_unhealthy"], reason=reason)
    return json_response({})


async def events(deps: ApiDeps, request: web.Request, stack: StackView, resource: str | None) -> web.Response:
    """Events, filtered by `resource_name`, `resource_action`, `resource_status` (COMPLETE
    or CREATE_COMPLETE) and `resource_type` (each repeatable), sorted by `sort_keys`
    (event_time, resource_type) and `sort_dir`, paged by `limit` and `marker`, as Heat
    lists them. Without sort_keys and sort_dir they come oldest first (Heat: newest
    first; its CLI always asks for oldest first). With `nested_depth` they include the
    nested stacks' events, each linking its root stack. A resource with no event at all
    answers 404, as in Heat."""
    q = request.query
    try:
        marker = uuid.UUID(q["marker"]) if "marker" in q else None
        limit = max(0, min(int(q.get("limit", MAX_EVENTS)), MAX_EVENTS))
    except ValueError as exc:
        raise bad_request(f"bad paging parameter: {exc}") from exc
    sort_keys = [k for value in query_values(request, ("sort_keys",)) for k in value.split(",") if k]
    sort_dir = q.get("sort_dir", "asc")
    if sort_dir not in ("asc", "desc"):
        raise bad_request(f"sort_dir must be asc or desc, not {sort_dir[:20]!r}")
    where = EventFilter(
        names=[resource] if resource is not None else query_values(request, ("resource_name",)),
        actions=query_values(request, ("resource_action",)),
        statuses=query_values(request, ("resource_status",)),
        types=query_values(request, ("resource_type",)),
        sort_keys=sort_keys,
        sort_dir=sort_dir,
    )
    depth = _nested_depth(request) if resource is None else 0
    tree = await deps.queries.stack_tree(stack.stack_id, depth) if depth else []
    stacks = {n.stack_id: n for n in tree}
    rows = await deps.queries.events(list(stacks) or stack.stack_id, where=where, limit=limit, marker=marker)
    if not rows and resource is not None and marker is None:
        raise not_found(f"No events found for resource {resource}")
    secrets = await deps.secrets.for_stacks(list({r["stack_id"] for r in rows}))
    base = _base(request)
    root_link = {"href": stack_path(base, stack.name, stack.stack_id), "rel": "root_stack"}
    views = []
    for r in rows:
        nested = stacks.get(r["stack_id"])
        shown = secrets.get(r["stack_id"], NO_SECRETS)
        if nested is None or nested.depth == 0:
            view = event_view(dict(r), stack, base, secrets=shown)
        else:  # an event of a nested stack: its links point there, and it names the root
            owner = replace(stack, stack_id=nested.stack_id, name=nested.name)
            view = event_view(dict(r), owner, base, secrets=shown)
            view["root_stack_id"] = str(stack.stack_id)
        if depth:  # as Heat: the list covers a tree; heatclient then trusts it
            view["links"].append(root_link)
        views.append(view)
    return json_response({"events": views})


async def event(
    deps: ApiDeps, request: web.Request, stack: StackView, event_id: str, resource: str | None = None
) -> web.Response:
    """One event; under a resource's path only that resource's."""
    try:
        row = await deps.queries.event(stack.stack_id, uuid.UUID(event_id))
    except ValueError:
        row = None
    if row is None or (resource is not None and row["resource_name"] != resource):
        raise not_found(f"The Event ({event_id}) could not be found.")
    secrets = await deps.secrets.for_stack(stack.stack_id)
    return json_response({"event": event_view(dict(row), stack, _base(request), secrets=secrets)})
