"""A small REST API on aiohttp.web, served on 127.0.0.1 for the HTTP plugin tests.

Items live in `FakeApi.items`; tests change them directly (e.g. flip a status
to ACTIVE) instead of waiting. Every request is recorded in `FakeApi.seen`.
A body with `"fail": true` is refused (400, "<_name> was told to fail"), for
failure scenarios. Like real APIs it honours `Idempotency-Key`: a repeated POST with a key it has
seen returns the item that key created. `create_gate`, when set, holds every
POST open until the test releases it (to kill a worker mid-request).
`refuse_deletes`, when set, refuses every DELETE (409 with that message), as a
cloud does while something still uses the item. Updating an item that does
not exist answers 404.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeApi:
    items: dict[str, dict[str, Any]] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    create_status: str = "ACTIVE"
    delete_slowly: bool = False
    next_id: int = 1
    port: int = 0
    by_key: dict[str, str] = field(default_factory=dict)
    create_gate: asyncio.Event | None = None
    posts_started: int = 0
    created: list[str] = field(default_factory=list)  # ids of items ever created
    refuse_deletes: str | None = None
    bodies: dict[str, Any] = field(default_factory=dict)  # by id: the body that created each item

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _record(self, request: web.Request) -> Any:
        body = await request.json() if request.can_read_body else None
        self.seen.append(Seen(request.method, request.path, dict(request.headers), body))
        return body

    async def create(self, request: web.Request) -> web.Response:
        body = await self._record(request)
        self.posts_started += 1
        if self.create_gate is not None:
            await self.create_gate.wait()
        key = request.headers.get("Idempotency-Key")
        if key is not None and key in self.by_key and self.by_key[key] in self.items:
            return web.json_response(self.items[self.by_key[key]], status=200)
        if isinstance(body, dict) and body.get("fail") is True:
            return web.json_response({"message": f"{body.get('_name')} was told to fail"}, status=400)
        item_id = f"it-{self.next_id}"
        self.created.append(item_id)
        self.bodies[item_id] = body
        if key is not None:
            self.by_key[key] = item_id
        self.next_id += 1
        self.items[item_id] = {**body, "id": item_id, "status": self.create_status}
        return web.json_response(self.items[item_id], status=201)

    async def show(self, request: web.Request) -> web.Response:
        await self._record(request)
        item = self.items.get(request.match_info["id"])
        if item is None:
            return web.json_response({"message": "no such item"}, status=404)
        return web.json_response(item)

    async def put(self, request: web.Request) -> web.Response:
        body = await self._record(request)
        if isinstance(body, dict) and body.get("fail") is True:
            return web.json_response({"message": f"{body.get('_name')} was told to fail"}, status=400)
        item = self.items.get(request.match_info["id"])
        if item is None:
            return web.json_response({"message": "no such item"}, status=404)
        self.items[item["id"]] = {**body, "id": item["id"], "status": item["status"]}
        return web.json_response(self.items[item["id"]])

    async def patch(self, request: web.Request) -> web.Response:
        body = await self._record(request)
        item = self.items.get(request.match_info["id"])
        if item is None:
            return web.json_response({"message": "no such item"}, status=404)
        for key, value in body.items():
            if value is None:
                item.pop(key, None)
            else:
                item[key] = value
        return web.Response(status=204)

    async def delete(self, request: web.Request) -> web.Response:
        await self._record(request)
        item_id = request.match_info["id"]
        if item_id not in self.items:
            return web.json_response({"message": "no such item"}, status=404)
        if self.refuse_deletes is not None:
            return web.json_response({"message": self.refuse_deletes}, status=409)
        if self.delete_slowly:
            self.items[item_id]["status"] = "DELETING"
            return web.Response(status=202)
        del self.items[item_id]
        return web.Response(status=204)

    async def broken(self, request: web.Request) -> web.Response:
        await self._record(request)
        return web.json_response(
            {"error": {"message": "database down"}}, status=500, headers={"Retry-After": "7"}
        )

    async def limited(self, request: web.Request) -> web.Response:
        await self._record(request)
        return web.json_response({"message": "slow down"}, status=429, headers={"Retry-After": "3"})

    async def bad(self, request: web.Request) -> web.Response:
        await self._record(request)
        return web.json_response({"message": "name is required"}, status=400)

    async def away(self, request: web.Request) -> web.Response:
        await self._record(request)
        raise web.HTTPFound("http://forbidden.example/things")

    async def moved(self, request: web.Request) -> web.Response:
        await self._record(request)
        raise web.HTTPTemporaryRedirect("/things")

    async def loop(self, request: web.Request) -> web.Response:
        await self._record(request)
        raise web.HTTPFound("/loop")

    async def bad_port(self, request: web.Request) -> web.Response:
        """A redirect whose Location has a port no URL can have."""
        await self._record(request)
        return web.Response(status=302, headers={"Location": "http://127.0.0.1:99999999/things"})

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/things", self.create)
        app.router.add_get("/things/{id}", self.show)
        app.router.add_put("/things/{id}", self.put)
        app.router.add_patch("/things/{id}", self.patch)
        app.router.add_delete("/things/{id}", self.delete)
        app.router.add_route("*", "/broken", self.broken)
        app.router.add_route("*", "/limited", self.limited)
        app.router.add_route("*", "/bad", self.bad)
        app.router.add_route("*", "/away", self.away)
        app.router.add_route("*", "/moved", self.moved)
        app.router.add_route("*", "/loop", self.loop)
        app.router.add_route("*", "/bad-port", self.bad_port)
        return app


@asynccontextmanager
async def serve(api: FakeApi) -> AsyncIterator[FakeApi]:
    runner = web.AppRunner(api.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    api.port = runner.addresses[0][1]
    try:
        yield api
    finally:
        await runner.cleanup()
