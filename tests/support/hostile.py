"""Hostile-request tests against a real server: two projects, probes of health and memory.

Where it sits: the `tests/integration/test_hostile_*.py` modules start a real
`converge up` process (`start_server`: external PostgreSQL of the test, the
in-process bus and sandbox, tokens for two projects and an admin) and drive
it over real HTTP with `Api`. While an abusive request is in flight,
`Probe` asks `/healthz` again and again and samples the server's resident
memory from /proc, so a test can say "the server kept answering and did not
balloon" with the bounds the hostile-input issue states (`HEALTHZ_BOUND`,
`RSS_BOUND`): the probe records the slowest answer and the largest growth
seen, and the test compares them once the request is done.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

from tests.support.ports import free_port
from tests.support.processes import ServiceProcess

#: Ports `start_server` tries before it gives up.
PORT_ATTEMPTS = 3
#: Project tokens of every hostile test server: project alpha, project beta, an admin.
TOKENS = "ta=alpha,tb=beta,tadm=admin:admin"
ALPHA, BETA, ADMIN = ("ta", "alpha"), ("tb", "beta"), ("tadm", "admin")
#: While an abusive request is in flight /healthz answers within this (seconds) ...
HEALTHZ_BOUND = 0.1
#: ... and the server's resident memory grows by less than this (bytes).
RSS_BOUND = 100 * 1024 * 1024

T = TypeVar("T")


@dataclass
class Server:
    process: ServiceProcess
    base: str  # http://127.0.0.1:<port>

    @property
    def pid(self) -> int:
        assert self.process.process is not None
        return self.process.process.pid

    def rss(self) -> int:
        """The server process's resident set size now (bytes)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError(f"no VmRSS for pid {self.pid}")


@contextlib.asynccontextmanager
async def start_server(
    data_dir: Path, database_url: str, *, env: dict[str, str] | None = None
) -> AsyncIterator[Server]:
    """`converge up` on a free port with `TOKENS`; stopped (killed if need be) on exit.
    A port picked free can be taken by another process before the server binds it: the
    server then exits saying so, and is started again on another (`PORT_ATTEMPTS`)."""
    for attempt in range(1, PORT_ATTEMPTS + 1):
        port = free_port()
        settings = {
            "CONVERGE_DATA_DIR": str(data_dir),
            "CONVERGE_API_PORT": str(port),
            "CONVERGE_DATABASE_URL": database_url,
            "CONVERGE_AMQP_URL": "",
            "CONVERGE_API_TOKENS": TOKENS,
            "CONVERGE_SANDBOX_LATENCY": "0.05",
            **(env or {}),
        }
        process = await ServiceProcess(["converge", "up"], settings).start()
        try:
            await process.wait_for_event("ready", timeout=90)
        except AssertionError:  # it exited before it was ready
            await process.stop()
            if f"port {port} on 127.0.0.1 is in use" in process.output() and attempt < PORT_ATTEMPTS:
                continue
            raise
        break
    try:
        yield Server(process, f"http://127.0.0.1:{port}")
    finally:
        await process.stop()


@dataclass
class Response:
    status: int
    body: Any
    headers: dict[str, str]
    seconds: float


class Api:
    """A small client of one server: `await api.call("GET", "/v1/alpha/stacks", token="ta")`."""

    def __init__(self, http: aiohttp.ClientSession, base: str) -> None:
        self.http = http
        self.base = base

    async def call(
        self,
        method: str,
        path: str,
        *,
        token: str | None = None,
        json: Any = None,
        data: bytes | str | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 120,
    ) -> Response:
        sent = {**({"X-Auth-Token": token} if token is not None else {}), **(headers or {})}
        started = time.monotonic()
        async with self.http.request(
            method,
            f"{self.base}{path}",
            json=json,
            data=data,
            headers=sent,
            allow_redirects=False,
            timeout=aiohttp.ClientTimeout(total=timeout),
        ) as response:
            raw = await response.read()
            body: Any = raw.decode(errors="replace")
            if response.content_type == "application/json":
                body = await response.json()
            return Response(response.status, body, dict(response.headers), time.monotonic() - started)

    async def stack_status(self, project: str, token: str, name: str) -> str:
        found = await self.call("GET", f"/v1/{project}/stacks?name={name}", token=token)
        stacks = found.body["stacks"]
        return f"{stacks[0]['stack_status']}" if stacks else "MISSING"

    async def until_settled(self, project: str, token: str, name: str, *, timeout: float = 120) -> str:
        """The stack's status once it is no longer IN_PROGRESS."""
        async with asyncio.timeout(timeout):
            while True:
                status = await self.stack_status(project, token, name)
                if not status.endswith("IN_PROGRESS"):
                    return status
                await asyncio.sleep(0.1)


@dataclass
class Probe:
    """What `probing` saw while the abusive request ran."""

    latencies: list[float] = field(default_factory=list)  # seconds, each /healthz answer
    rss_before: int = 0
    rss_peak: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def slowest(self) -> float:
        return max(self.latencies, default=0.0)

    @property
    def answers(self) -> int:
        return len(self.latencies)

    @property
    def rss_growth(self) -> int:
        return max(0, self.rss_peak - self.rss_before)

    def assert_healthy(self) -> None:
        """The server answered /healthz within the bound throughout and did not balloon."""
        assert not self.failures, self.failures
        assert self.answers > 0, "no /healthz answer while the request ran"
        assert self.slowest < HEALTHZ_BOUND, f"/healthz took {self.slowest * 1000:.0f} ms"
        assert self.rss_growth < RSS_BOUND, f"RSS grew by {self.rss_growth / 2**20:.0f} MiB"


async def probing(server: Server, request: Awaitable[T], *, every: float = 0.02) -> tuple[T, Probe]:
    """Run `request` while asking /healthz every `every` seconds and sampling RSS.

    The probe keeps going until the request is done and at least a few
    answers were seen, so a request that ends at once still gets measured. It
    runs on an event loop of its own, in a thread: what it times is the server,
    not this test's loop busy sending the abusive request.
    """
    probe = Probe(rss_before=server.rss())
    probe.rss_peak = probe.rss_before
    done = threading.Event()

    async def watch() -> None:
        async with aiohttp.ClientSession() as http:
            while not done.is_set() or probe.answers < 3:
                started = time.monotonic()
                try:
                    async with http.get(
                        f"{server.base}/healthz", timeout=aiohttp.ClientTimeout(total=30)
                    ) as response:
                        await response.read()
                        if response.status != 200:
                            probe.failures.append(f"/healthz answered {response.status}")
                except (aiohttp.ClientError, TimeoutError) as exc:
                    probe.failures.append(f"/healthz failed: {exc!r}")
                probe.latencies.append(time.monotonic() - started)
                probe.rss_peak = max(probe.rss_peak, server.rss())
                await asyncio.sleep(every)

    watcher = asyncio.create_task(asyncio.to_thread(asyncio.run, watch()))
    try:
        result = await request
    finally:
        done.set()
        await watcher
    return result, probe
