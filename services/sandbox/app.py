"""The sandbox's HTTP API: thin aiohttp handlers over `SandboxService`.

Routes (JSON in and out; `{collection}` is networks, subnets, servers,
volumes, volume_attachments or things):

    GET    /v1                             kinds, their fields' update rules, flavors
    GET    /v1/inventory                   every live resource, counts by kind, creates ever
    GET    /v1/{collection}                {"<collection>": [resource, ...]}
    POST   /v1/{collection}                create: 201, or 200 + Idempotent-Replayed: true
                                           when the Idempotency-Key header was seen before
    GET    /v1/{collection}/{id}           one resource
    PATCH  /v1/{collection}/{id}           JSON merge patch of its properties (null = default)
    DELETE /v1/{collection}/{id}           204; immediate
    POST   /v1/{collection}/{id}/break     out-of-band failure: ERROR, body {"reason": "..."}
    PUT    /v1/servers/{id}/load           a server's load, body {"load": 0..100} (GET reads it)
    GET    /v1/alarms                      {"alarms": [alarm, ...]}
    POST   /v1/alarms                      create an alarm on servers' average load (alarms.py): 201
                                           (a repeated Idempotency-Key answers the same alarm)
    GET    /v1/alarms/{id}                 one alarm, with its state and last average
    DELETE /v1/alarms/{id}                 204

Errors are `{"error": {"code", "title", "message"}}`: 400 invalid input,
404 unknown resource, 409 a rule or integrity conflict (replace-only field,
resource still in use, volume already attached), 503 the state could not be
saved. With a state file, no answer leaves before every change made so far
is on disk (`SandboxService.durable`): an answer never reports what a crash
could undo. The inventory also says how many resources the cloud has ever
created (`created`; an idempotent replay creates none).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from services.sandbox.service import SandboxService
from services.sandbox.specs import FLAVORS, SPECS, Kind, rule_table
from services.sandbox.state import SandboxStateUnavailable
from shared.errors import ConflictError, InvalidInput, NotFound

IDEMPOTENCY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"


def _error(status: int, message: str) -> web.Response:
    title = {400: "Bad Request", 404: "Not Found", 409: "Conflict", 503: "Service Unavailable"}.get(
        status, "Error"
    )
    return web.json_response({"error": {"code": status, "title": title, "message": message}}, status=status)


def error_middleware(service: SandboxService) -> Middleware:
    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            try:
                response = await handler(request)
            finally:
                await service.durable()  # nothing is answered that a crash could undo
            return response
        except InvalidInput as exc:
            response = _error(400, str(exc))
        except NotFound as exc:
            response = _error(404, str(exc))
        except ConflictError as exc:
            response = _error(409, str(exc))
        except SandboxStateUnavailable as exc:
            response = _error(503, str(exc))
        service.metrics.refused.labels(str(response.status)).inc()
        return response

    return middleware


def _kind(request: web.Request) -> Kind:
    name = request.match_info["collection"]
    kind = Kind.from_collection(name)
    if kind is None:
        known = ", ".join(k.collection for k in Kind)
        raise NotFound(f"no collection {name!r} (collections: {known})")
    return kind


async def _body(request: web.Request, *, required: bool = True) -> Any:
    if not request.can_read_body:
        if required:
            raise InvalidInput("a JSON object is required as the request body")
        return {}
    try:
        return await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"the request body is not JSON: {exc}") from exc


class SandboxRoutes:
    def __init__(self, service: SandboxService) -> None:
        self._service = service

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/v1", self.index),
            web.get("/v1/inventory", self.inventory),
            web.get("/v1/alarms", self.list_alarms),
            web.post("/v1/alarms", self.create_alarm),
            web.get("/v1/alarms/{id}", self.show_alarm),
            web.delete("/v1/alarms/{id}", self.delete_alarm),
            web.put("/v1/servers/{id}/load", self.set_load),
            web.get("/v1/servers/{id}/load", self.get_load),
            web.get("/v1/{collection}", self.list_kind),
            web.post("/v1/{collection}", self.create),
            web.get("/v1/{collection}/{id}", self.show),
            web.patch("/v1/{collection}/{id}", self.update),
            web.delete("/v1/{collection}/{id}", self.delete),
            web.post("/v1/{collection}/{id}/break", self.break_),
            web.put("/v1/servers/{id}/agent", self.set_agent),
        ]

    async def index(self, _: web.Request) -> web.Response:
        rules = rule_table()
        kinds = {
            kind.value: {
                "collection": kind.collection,
                "fields": {k: v.value for k, v in rules[kind].items()},
            }
            for kind in SPECS
        }
        return web.json_response(
            {"kinds": kinds, "flavors": list(FLAVORS), "notifications": self._service.notification_queue}
        )

    async def inventory(self, _: web.Request) -> web.Response:
        resources = self._service.inventory()
        counts = {kind.value: 0 for kind in Kind}
        for res in resources:
            counts[res["kind"]] += 1
        return web.json_response({"resources": resources, "counts": counts, "created": self._service.created})

    async def list_kind(self, request: web.Request) -> web.Response:
        kind = _kind(request)
        return web.json_response({kind.collection: self._service.list_kind(kind)})

    async def create(self, request: web.Request) -> web.Response:
        kind = _kind(request)
        body = await _body(request)
        created = self._service.create(kind, body, idempotency_key=request.headers.get(IDEMPOTENCY_HEADER))
        location = f"{request.path.rstrip('/')}/{created.resource['id']}"
        if created.replayed:
            return web.json_response(
                created.resource, headers={REPLAYED_HEADER: "true", "Location": location}
            )
        return web.json_response(created.resource, status=201, headers={"Location": location})

    async def show(self, request: web.Request) -> web.Response:
        return web.json_response(self._service.get(_kind(request), request.match_info["id"]))

    async def update(self, request: web.Request) -> web.Response:
        kind = _kind(request)
        body = await _body(request)
        return web.json_response(self._service.update(kind, request.match_info["id"], body))

    async def delete(self, request: web.Request) -> web.Response:
        self._service.delete(_kind(request), request.match_info["id"])
        return web.Response(status=204)

    async def list_alarms(self, _: web.Request) -> web.Response:
        return web.json_response({"alarms": self._service.list_alarms()})

    async def create_alarm(self, request: web.Request) -> web.Response:
        key = request.headers.get(IDEMPOTENCY_HEADER)
        return web.json_response(
            self._service.create_alarm(await _body(request), idempotency_key=key), status=201
        )

    async def show_alarm(self, request: web.Request) -> web.Response:
        return web.json_response(self._service.get_alarm(request.match_info["id"]))

    async def delete_alarm(self, request: web.Request) -> web.Response:
        self._service.delete_alarm(request.match_info["id"])
        return web.Response(status=204)

    async def set_load(self, request: web.Request) -> web.Response:
        body = await _body(request)
        return web.json_response(self._service.set_load(request.match_info["id"], body))

    async def get_load(self, request: web.Request) -> web.Response:
        return web.json_response(self._service.get_load(request.match_info["id"]))

    async def break_(self, request: web.Request) -> web.Response:
        kind = _kind(request)
        body = await _body(request, required=False)
        reason = body.get("reason", "") if isinstance(body, dict) else ""
        if not isinstance(reason, str):
            raise InvalidInput("must be a string", path="reason")
        return web.json_response(self._service.break_(kind, request.match_info["id"], reason))

    async def set_agent(self, request: web.Request) -> web.Response:
        body = await _body(request)
        return web.json_response(self._service.set_agent(request.match_info["id"], body))


def build_app(service: SandboxService, *, extra_routes: Iterable[web.RouteDef] = ()) -> web.Application:
    """The sandbox application; `converge-sandbox` adds health and metrics routes,
    `converge up` mounts it as is under `/sandbox`."""
    app = web.Application(middlewares=[error_middleware(service)])
    app.add_routes([*extra_routes, *SandboxRoutes(service).routes()])
    return app
