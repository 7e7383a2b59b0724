"""A Heat API client for tests of a running `converge up`, and its restarts.

`UpClient` speaks the v1 API with the token `converge up` generated, as a user
with curl would; `settled` waits (bounded) until a stack's operation ended,
riding out the moments the process is down between a kill and a restart.
`Restarts` starts `converge up`, stops it with a real signal and starts it
again on the same data directory, and leaves nothing running at the end
(not even the embedded PostgreSQL a SIGKILL left behind).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from services.engine.store.embedded import start_embedded
from tests.support.sandbox import RunningUp, SandboxClient, start_up
from tests.support.waiting import eventually

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

    async def create(self, name: str, template: dict[str, Any] | str, **fields: Any) -> str:
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

    async def metric(self, name: str, **labels: str) -> float:
        """A sample of the process's Prometheus metrics (0 when absent)."""
        async with self.http.get(f"{self.base}/metrics") as response:
            text = await response.text()
        wanted = name + (
            "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}" if labels else ""
        )
        for line in text.splitlines():
            if line.startswith(wanted + " "):
                return float(line.split()[-1])
        return 0.0

    @property
    def sandbox(self) -> SandboxClient:
        """The in-process sandbox cloud, under `/sandbox`."""
        return SandboxClient(self.http, f"{self.base}/sandbox")


class Restarts:
    """`converge up` on one data directory: started, stopped with a real signal, started
    again. `database_url` None: its embedded PostgreSQL. `env` is added to its environment."""

    def __init__(
        self,
        data_dir: Path,
        database_url: str | None,
        http: aiohttp.ClientSession,
        *,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.data_dir, self.database_url, self.http = data_dir, database_url, http
        self.env = dict(env or {})
        self.running: RunningUp | None = None
        self.stops: list[str] = []  # the signals sent, in order

    async def start(self) -> UpClient:
        self.running = await start_up(self.data_dir, self.database_url, env=self.env)
        return UpClient(self.http, self.running.base, self.running.token)

    async def stop(self, sig: signal.Signals) -> None:
        """Send `sig`; it must end the process (Ctrl-C: cleanly, after draining)."""
        assert self.running is not None
        process, self.running = self.running.process, None
        process.signal(sig)
        code = await process.wait(timeout=90)
        assert code == (-signal.SIGKILL if sig is signal.SIGKILL else 0), process.output()
        self.stops.append(sig.name)

    async def close(self) -> None:
        """Stop what still runs: Ctrl-C (which stops the embedded PostgreSQL too), and an
        embedded PostgreSQL a SIGKILL left running."""
        if self.running is not None:
            process, self.running = self.running.process, None
            if process.process is not None and process.process.returncode is None:
                process.signal(signal.SIGINT)
                try:
                    await process.wait(timeout=60)
                except TimeoutError:
                    await process.stop()
            await process.stop()
        if self.database_url is None and (self.data_dir / "postgres" / "postmaster.pid").exists():
            await (await start_embedded(self.data_dir)).stop()
