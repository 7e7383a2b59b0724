"""A Heat API client for tests of a running `converge up`: create, change and watch stacks.

`UpClient` speaks the v1 API with the token `converge up` generated, as a user
with curl would; `settled` waits (bounded) until a stack's operation ended,
riding out the moments the process is down between a kill and a restart.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import aiohttp

from tests.support.bus_fixtures import eventually

# What a client sees while `converge up` is down (killed, not yet restarted).
DOWN = (aiohttp.ClientConnectionError, asyncio.TimeoutError)


@dataclass
class UpClient:
    http: aiohttp.ClientSession
    base: str  # http://127.0.0.1:<port>
    token: str
    project: str = "demo"

    async def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """(status, JSON body or None) of one request to `/v1/{project}{path}`."""
        async with self.http.request(
            method,
            f"{self.base}/v1/{self.project}{path}",
            json=body,
            headers={"X-Auth-Token": self.token},
            timeout=aiohttp.ClientTimeout(total=30),
        ) as response:
            data = await response.json() if response.content_type == "application/json" else None
            return response.status, data

    async def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, data = await self.call(method, path, body)
        assert 200 <= status < 300, f"{method} {path} -> {status}: {data}"
        return data

    async def create(self, name: str, template: dict[str, Any], **fields: Any) -> str:
        created = await self.ok("POST", "/stacks", {"stack_name": name, "template": template, **fields})
        return str(created["stack"]["id"])

    async def update(self, name: str, stack_id: str, template: dict[str, Any]) -> None:
        await self.ok("PUT", f"/stacks/{name}/{stack_id}", {"template": template})

    async def delete(self, name: str, stack_id: str) -> None:
        await self.ok("DELETE", f"/stacks/{name}/{stack_id}")

    async def action(self, name: str, stack_id: str, action: str, body: Any = None) -> None:
        await self.ok("POST", f"/stacks/{name}/{stack_id}/actions", {action: body})

    async def state(self, name: str, stack_id: str) -> str:
        """`ACTION_STATUS` of the stack (DELETE_COMPLETE once it is gone)."""
        status, data = await self.call("GET", f"/stacks/{name}/{stack_id}")
        if status == 404:
            return "DELETE_COMPLETE"
        assert status == 200, data
        return str(data["stack"]["stack_status"])

    async def settled(self, name: str, stack_id: str, *, timeout: float = 120) -> str:
        """Wait (bounded) until the stack is no longer IN_PROGRESS; its state. A
        `converge up` that is down is waited for."""
        seen: list[str] = []

        async def ended() -> bool:
            try:
                seen.append(await self.state(name, stack_id))
            except DOWN:
                return False
            return not seen[-1].endswith("_IN_PROGRESS")

        try:
            await eventually(ended, timeout=timeout, every=0.2)
        except AssertionError:
            raise AssertionError(f"stack {name} still {seen[-1:] or '?'} after {timeout} s") from None
        return seen[-1]

    async def resources(self, name: str, stack_id: str) -> list[dict[str, Any]]:
        data = await self.ok("GET", f"/stacks/{name}/{stack_id}/resources")
        return list(data["resources"])

    async def events(self, name: str, stack_id: str) -> list[dict[str, Any]]:
        data = await self.ok("GET", f"/stacks/{name}/{stack_id}/events?limit=1000")
        return list(data["events"])
