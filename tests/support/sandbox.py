"""The sandbox cloud in tests: a real `converge-sandbox` process, `converge up` with its
in-process sandbox, and a small HTTP client.

`start_sandbox` runs the console script on a free port (with the given extra
environment: bus, latency, seed) and waits for its `ready` log event;
`start_up` does the same for `converge up` on a scratch data directory;
`SandboxClient` reads and pokes it the way an operator with curl would.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from tests.support.ports import free_port
from tests.support.processes import ServiceProcess


@dataclass
class RunningSandbox:
    process: ServiceProcess
    url: str  # base URL; the API is under {url}/v1


async def start_sandbox(env: dict[str, str]) -> RunningSandbox:
    port = free_port()
    process = await ServiceProcess(
        ["converge-sandbox"],
        {"CONVERGE_SANDBOX_PORT": str(port), "CONVERGE_SANDBOX_HOST": "127.0.0.1", **env},
    ).start()
    await process.wait_for_event("ready")
    return RunningSandbox(process, f"http://127.0.0.1:{port}")


@dataclass
class RunningUp:
    process: ServiceProcess
    base: str  # http://127.0.0.1:<port>
    token: str  # the token `converge up` generated for project demo


async def start_up(
    data_dir: Path,
    database_url: str | None,
    *,
    latency: float = 0.1,
    port: int | None = None,
    env: Mapping[str, str] | None = None,
) -> RunningUp:
    """`converge up` with the in-process bus and sandbox, on a free port (or `port`);
    `database_url` None: its embedded PostgreSQL under `data_dir`; `env` is added."""
    port = port or free_port()
    env = {
        "CONVERGE_DATA_DIR": str(data_dir),
        "CONVERGE_API_PORT": str(port),
        "CONVERGE_DATABASE_URL": database_url or "",
        "CONVERGE_AMQP_URL": "",
        "CONVERGE_SANDBOX_LATENCY": str(latency),
        **(env or {}),
    }
    process = await ServiceProcess(["converge", "up"], env).start()
    try:
        await process.wait_for_event("ready", timeout=90)
    except BaseException:
        await process.stop()
        raise
    token = json.loads((data_dir / "credentials.json").read_text())["token"]
    return RunningUp(process, f"http://127.0.0.1:{port}", token)


@dataclass
class SandboxClient:
    http: aiohttp.ClientSession
    url: str  # base URL of the sandbox (`.../sandbox` under `converge up`)

    async def call(
        self, method: str, path: str, body: Any = None, *, headers: dict[str, str] | None = None
    ) -> tuple[int, Any, dict[str, str]]:
        """(status, JSON body or None, headers) of one request to `{url}/v1{path}`."""
        async with self.http.request(method, f"{self.url}/v1{path}", json=body, headers=headers) as response:
            data = await response.json() if response.content_type == "application/json" else None
            return response.status, data, dict(response.headers)

    async def ok(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        status, data, _ = await self.call(method, path, body, **kwargs)
        assert 200 <= status < 300, f"{method} {path} -> {status}: {data}"
        return data

    async def inventory(self) -> list[dict[str, Any]]:
        return list((await self.ok("GET", "/inventory"))["resources"])

    async def status(self, collection: str, resource_id: str) -> str:
        return str((await self.ok("GET", f"/{collection}/{resource_id}"))["status"])
