"""Heat v1 routes of stack snapshots and export (under one stack), and build_info.

    POST   .../snapshots                      take a snapshot ({"name": ...} optional)
    GET    .../snapshots                      list them
    GET    .../snapshots/{id}                 show one
    DELETE .../snapshots/{id}                 delete one
    POST   .../snapshots/{id}/restore         restore the stack to it (an update)
    GET    .../export                         the stack's document, as abandon gives it
    GET    /v1/{project}/build_info           what is running

The work is `services.engine.snapshots`; these are the HTTP edges, in Heat's
shapes (a snapshot as Heat's `format_snapshot` shows it). As with abandon,
export and a snapshot's data show hidden parameters' values: they are what
adopt and restore take back.
"""

from __future__ import annotations

import importlib.metadata

from aiohttp import web

from services.engine.api.deps import ApiDeps
from services.engine.api.errors import bad_request, not_found
from services.engine.api.requests import read_json
from services.engine.api.views import json_response
from services.engine.core.model import StackId
from services.engine.store.queries import StackView


def is_snapshot_path(rest: list[str]) -> bool:
    return bool(rest) and rest[0] in ("snapshots", "export")


async def dispatch(deps: ApiDeps, request: web.Request, stack: StackView, rest: list[str]) -> web.Response:
    method, stack_id = request.method, StackId(stack.stack_id)
    snapshots = deps.snapshots
    if rest == ["export"] and method == "GET":  # unmasked, as abandon: it is what adopt takes
        return json_response(await snapshots.export(stack_id))
    if rest == ["snapshots"] and method == "POST":
        body = await read_json(request)
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise bad_request('a snapshot body is an object: {"name": <name>} or {}')
        return json_response(await snapshots.create(stack_id, body.get("name")))
    if rest == ["snapshots"] and method == "GET":
        return json_response({"snapshots": await snapshots.all(stack_id)})
    if len(rest) == 2 and rest[0] == "snapshots" and method == "GET":
        return json_response({"snapshot": await snapshots.show(stack_id, rest[1])})
    if len(rest) == 2 and rest[0] == "snapshots" and method == "DELETE":
        await snapshots.delete(stack_id, rest[1])
        return web.Response(status=204)
    if len(rest) == 3 and rest[0] == "snapshots" and rest[2] == "restore" and method == "POST":
        await snapshots.restore(stack_id, rest[1])
        return web.Response(status=202)
    raise not_found(f"no such path under stack {stack.name}: /{'/'.join(rest)}")


async def build_info(request: web.Request) -> web.Response:
    """What is running, as Heat answers GET /build_info."""
    revision = importlib.metadata.version("converge")
    return json_response({"api": {"revision": revision}, "engine": {"revision": revision}})
