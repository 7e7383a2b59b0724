"""A test's client of a running `converge up`: the Heat API of project demo, waiting for
a stack's operation to end, and the in-process sandbox cloud (for out-of-band changes).

Every wait is on a condition with a generous bound; a failed wait says what was seen.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from tests.support.sandbox import RunningUp, SandboxClient, start_up
from tests.support.waiting import eventually

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@dataclass
class Stack:
    name: str
    id: str

    @property
    def path(self) -> str:
        return f"/stacks/{self.name}/{self.id}"


@dataclass
class UpApi:
    running: RunningUp
    http: aiohttp.ClientSession

    @property
    def sandbox(self) -> SandboxClient:
        return SandboxClient(self.http, f"{self.running.base}/sandbox")

    async def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        headers = {"X-Auth-Token": self.running.token}
        url = f"{self.running.base}/v1/demo{path}"
        async with self.http.request(method, url, json=body, headers=headers) as response:
            data = await response.json() if response.content_type == "application/json" else None
            return response.status, data

    async def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, data = await self.call(method, path, body)
        assert 200 <= status < 300, f"{method} {path} -> {status}: {data}"
        return data

    async def create(self, name: str, template: str | dict[str, Any], *, rollback: bool = False) -> Stack:
        body = {"stack_name": name, "template": template, "disable_rollback": not rollback}
        created = await self.ok("POST", "/stacks", body)
        return Stack(name, created["stack"]["id"])

    async def stack(self, stack: Stack) -> dict[str, Any]:
        return dict((await self.ok("GET", stack.path))["stack"])

    async def settle(self, stack: Stack, *, timeout: float = 120) -> dict[str, Any]:
        """The stack once its operation has ended (or it is gone: {})."""
        seen: dict[str, Any] = {}

        async def settled() -> bool:
            status, data = await self.call("GET", stack.path)
            seen.clear()
            if status == 404:
                return True
            seen.update(data["stack"])
            return not str(seen["stack_status"]).endswith("IN_PROGRESS")

        await eventually(settled, timeout=timeout, every=0.1)
        return seen

    async def resources(self, stack: Stack) -> dict[str, dict[str, Any]]:
        data = await self.ok("GET", f"{stack.path}/resources")
        return {r["resource_name"]: r for r in data["resources"]}

    async def physical_ids(self, stack: Stack) -> dict[str, str]:
        return {name: r["physical_resource_id"] for name, r in (await self.resources(stack)).items()}

    async def events(self, stack: Stack) -> list[dict[str, Any]]:
        """Every event of the stack, oldest first."""
        data = await self.ok("GET", f"{stack.path}/events?limit=10000&sort_dir=asc")
        return list(data["events"])

    async def act(self, stack: Stack, body: dict[str, Any]) -> None:
        await self.ok("POST", f"{stack.path}/actions", body)

    async def observation(self, stack: Stack) -> dict[str, Any]:
        return dict((await self.ok("GET", f"{stack.path}/observation"))["observation"])


@asynccontextmanager
async def up_api(data_dir: Path, database_url: str, **options: Any) -> AsyncIterator[UpApi]:
    """A fresh `converge up` (see `start_up` for the options) and a client of it."""
    running = await start_up(data_dir, database_url, **options)
    try:
        async with aiohttp.ClientSession() as http:
            yield UpApi(running, http)
    finally:
        await running.process.stop()


def example(name: str) -> str:
    """An example template as its YAML text (the API parses it, as Heat's does)."""
    return (EXAMPLES / name).read_text()
