"""Converge as operators run it, started fresh for one benchmark case.

`running(mode, options)` yields a `System`: a scratch database and queue
prefix of its own, and either one `converge up` process (in-process bus) or
`options.engines` engines, `options.workers` workers and `options.observers`
observers as separate processes over RabbitMQ. Stacks are created, updated
and deleted through the engines' HTTP API; the driver reads progress straight
from the database (cheap, and the same for both modes). On exit every process
is stopped (SIGTERM, then SIGKILL), the database dropped and the queues and
exchanges of the prefix deleted. Service logs go to files under a temporary
directory, kept only when a case fails.

Peak memory is the kernel's high-water mark of each process (`VmHWM`), so no
sampling can miss a spike.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aio_pika
import aiohttp
import asyncpg

from bench.harness.cpu import CpuUse, snapshot
from bench.harness.options import Options
from tests.support.databases import create_database, drop_database

BIN = Path(sys.executable).parent
PROJECT = "bench"
TOKEN = "bench-token"
MAX_TEMPLATE_BYTES = 128 * 1024 * 1024
#: Seconds between looks at a stack whose operation runs: what an operation's time can
#: overstate (a stack row read by primary key; 50 ms added 25 ms on average to a
#: 20 s critical path, an eighth of a percent).
SETTLED_POLL = 0.01
#: What an engine counts of the statements it sends PostgreSQL (`store.lifecycle.open_database`).
STATEMENTS_METRIC = "converge_engine_db_statements_total"
#: Every queue the services declare (`shared.protocol`, `shared.notifications`).
QUEUES = ("engine", "jobs", "observe", "notifications.sandbox")


def free_port() -> int:
    with contextlib.closing(socket.socket()) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def peak_rss_mib(pid: int) -> float | None:
    """The process's peak resident set (VmHWM) in MiB; None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


@dataclass
class Service:
    """One console-script process; its log is a file, its readiness an HTTP probe."""

    name: str
    argv: list[str]
    env: dict[str, str]
    port: int
    log_path: Path
    bin_dir: Path = BIN
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [str(self.bin_dir / self.argv[0]), *self.argv[1:]],
                env={**os.environ, **self.env},
                # Not the driver's directory: an older checkout's template pool put the
                # current directory first on its workers' module path (`template_pool`).
                cwd=self.log_path.parent,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    async def ready(self, session: aiohttp.ClientSession, *, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive:
                raise RuntimeError(f"{self.name} exited at start; see {self.log_path}")
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with session.get(f"http://127.0.0.1:{self.port}/readyz") as response:
                    if response.status == 200:
                        return
            await asyncio.sleep(0.1)
        raise TimeoutError(f"{self.name} not ready after {timeout:.0f}s; see {self.log_path}")

    def kill(self) -> None:
        if self.alive:
            assert self.process is not None
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    async def stop(self, *, grace: float = 10) -> None:
        if not self.alive:
            return
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            await asyncio.to_thread(self.process.wait, grace)
        self.kill()


@dataclass
class Stack:
    stack_id: uuid.UUID
    name: str


@dataclass
class Outcome:
    """How one stack operation ended: status and seconds from the request."""

    action: str
    status: str
    reason: str
    seconds: float
    accepted_seconds: float

    @property
    def ok(self) -> bool:
        return self.status == "COMPLETE"


@dataclass
class System:
    mode: str
    database_url: str
    prefix: str
    session: aiohttp.ClientSession
    pool: asyncpg.Pool
    services: list[Service] = field(default_factory=list)

    @property
    def api(self) -> str:
        engine = next(s for s in self.services if s.name in ("up", "engine-a"))
        return f"http://127.0.0.1:{engine.port}/v1/{PROJECT}"

    def by_kind(self) -> dict[str, list[Service]]:
        kinds: dict[str, list[Service]] = {}
        for service in self.services:
            kinds.setdefault(service.name.split("-")[0], []).append(service)
        return kinds

    async def cpu_use(self) -> CpuUse:
        """CPU seconds so far of each service (with the processes it started), and of
        PostgreSQL's and RabbitMQ's processes (`harness.cpu`)."""
        return await asyncio.to_thread(snapshot, {s.name: s.pid for s in self.services if s.alive})

    async def db_statements(self) -> float | None:
        """Statements the engines have sent PostgreSQL so far, all engines together (their
        `/metrics`: `converge_engine_db_statements_total`); None when no engine counts them
        (a checkout from before the count)."""
        total: float | None = None
        kinds = self.by_kind()
        for service in [*kinds.get("up", []), *kinds.get("engine", [])]:
            async with self.session.get(f"http://127.0.0.1:{service.port}/metrics") as response:
                text = await response.text()
            for line in text.splitlines():
                if line.startswith(f"{STATEMENTS_METRIC} "):
                    total = (total or 0.0) + float(line.split()[1])
        return total

    def peak_rss(self) -> dict[str, float]:
        """Peak RSS (MiB) of each live service process, by name."""
        out: dict[str, float] = {}
        for service in self.services:
            mib = peak_rss_mib(service.pid) if service.alive else None
            if mib is not None:
                out[service.name] = round(mib, 1)
        return out

    async def _request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = body if isinstance(body, str | None) else json.dumps(body)
        headers = {"X-Auth-Token": TOKEN, "Content-Type": "application/json"}
        async with self.session.request(method, f"{self.api}{path}", data=data, headers=headers) as response:
            text = await response.text()
            if response.status >= 400:
                raise RuntimeError(f"{method} {path}: {response.status} {text[:500]}")
            return response.status, json.loads(text) if text else None

    async def get(self, path: str) -> Any:
        """GET `path` under the project's API; the decoded body."""
        _, body = await self._request("GET", path)
        return body

    async def create(self, name: str, template: dict[str, Any]) -> tuple[Stack, float]:
        """Create through the API; the stack and the seconds the API took to accept it."""
        started = time.perf_counter()
        _, body = await self._request(
            "POST", "/stacks", {"stack_name": name, "template": template, "disable_rollback": True}
        )
        return Stack(uuid.UUID(body["stack"]["id"]), name), time.perf_counter() - started

    async def update(self, stack: Stack, template: dict[str, Any] | str) -> float:
        """Update through the API (`template` may be the request body, already encoded)."""
        body = template if isinstance(template, str) else {"template": template}
        started = time.perf_counter()
        await self._request("PUT", f"/stacks/{stack.name}/{stack.stack_id}", body)
        return time.perf_counter() - started

    async def delete(self, stack: Stack) -> float:
        started = time.perf_counter()
        await self._request("DELETE", f"/stacks/{stack.name}/{stack.stack_id}")
        return time.perf_counter() - started

    async def settled(self, stack: Stack, *, started: float, accepted: float, timeout: float) -> Outcome:
        """Wait until the stack's operation ends (or `timeout` seconds from `started`)."""
        while True:
            row = await self.pool.fetchrow(
                "SELECT action, status, status_reason FROM stacks WHERE stack_id = $1", stack.stack_id
            )
            elapsed = time.perf_counter() - started
            if row is not None and row["status"] != "IN_PROGRESS":
                return Outcome(row["action"], row["status"], row["status_reason"], elapsed, accepted)
            if elapsed > timeout:
                done = await self.done_count(stack)
                action = row["action"] if row is not None else "?"
                return Outcome(
                    action, "TIMEOUT", f"{done} resources done after {elapsed:.0f}s", elapsed, accepted
                )
            for service in self.services:
                if not service.alive:
                    raise RuntimeError(f"{service.name} died; see {service.log_path}")
            await asyncio.sleep(SETTLED_POLL)

    async def done_count(self, stack: Stack) -> int:
        return int(
            await self.pool.fetchval(
                "SELECT count(*) FROM resources WHERE stack_id = $1 AND action <> 'INIT' "
                "AND status = 'COMPLETE' AND current_job IS NULL",
                stack.stack_id,
            )
        )

    async def run(
        self, operation: str, stack: Stack, template: dict[str, Any] | None, *, timeout: float
    ) -> Outcome:
        """`update` or `delete` of `stack`, timed from the request to the end."""
        started = time.perf_counter()
        if operation == "update":
            assert template is not None
            accepted = await self.update(stack, template)
        else:
            accepted = await self.delete(stack)
        return await self.settled(stack, started=started, accepted=accepted, timeout=timeout)

    async def create_and_wait(
        self, name: str, template: dict[str, Any], *, timeout: float
    ) -> tuple[Stack, Outcome]:
        started = time.perf_counter()
        stack, accepted = await self.create(name, template)
        return stack, await self.settled(stack, started=started, accepted=accepted, timeout=timeout)


def _listed_by_broker(prefix: str) -> tuple[list[str], list[str]]:
    """Queues and exchanges of `prefix` per rabbitmqctl, when it is here (best effort)."""
    if shutil.which("rabbitmqctl") is None:
        return [], []
    found: list[list[str]] = []
    for what in ("list_queues", "list_exchanges"):
        try:
            out = subprocess.run(
                ["rabbitmqctl", "-q", what, "name"], capture_output=True, text=True, timeout=60, check=True
            ).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        found.append([line.split("\t")[0] for line in out.splitlines() if line.startswith(f"{prefix}.")])
    return found[0], found[1]


async def delete_queues(amqp_url: str, prefix: str) -> None:
    """Delete every queue and exchange of `prefix`: the known names plus whatever the broker lists."""
    listed_queues, listed_exchanges = await asyncio.to_thread(_listed_by_broker, prefix)
    queues = {f"{prefix}.{q}{suffix}" for q in QUEUES for suffix in ("", ".dead")} | set(listed_queues)
    exchanges = {f"{prefix}.dead-letter"} | set(listed_exchanges)
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        for name in sorted(queues):
            channel = await connection.channel()
            with contextlib.suppress(aio_pika.exceptions.AMQPError):
                await channel.queue_delete(name)
            with contextlib.suppress(aio_pika.exceptions.AMQPError):
                await channel.close()
        for name in sorted(exchanges):
            channel = await connection.channel()
            with contextlib.suppress(aio_pika.exceptions.AMQPError):
                await channel.exchange_delete(name)
            with contextlib.suppress(aio_pika.exceptions.AMQPError):
                await channel.close()


def _common_env(database_url: str, prefix: str, options: Options) -> dict[str, str]:
    return {
        "CONVERGE_LOG_FORMAT": "json",
        "CONVERGE_LOG_LEVEL": os.environ.get("CONVERGE_BENCH_LOG_LEVEL", "warning"),
        "CONVERGE_QUEUE_PREFIX": prefix,
        "CONVERGE_AMQP_URL": options.amqp_url,
        "CONVERGE_DRAIN_SECONDS": "3",
        "CONVERGE_HTTP_ALLOWED_HOSTS": "127.0.0.1",
        **options.service_env,
    }


def bin_dir(options: Options) -> Path:
    """The directory of the console scripts the services run from."""
    return Path(options.bin_dir) if options.bin_dir else BIN


def _services(mode: str, database_url: str, prefix: str, options: Options, logs: Path) -> list[Service]:
    common = _common_env(database_url, prefix, options)
    engine_env = {
        **common,
        "CONVERGE_DATABASE_URL": database_url,
        "CONVERGE_API_TOKENS": f"{TOKEN}={PROJECT}",
        "CONVERGE_MAX_TEMPLATE_BYTES": str(MAX_TEMPLATE_BYTES),
        "CONVERGE_MAX_STACKS_PER_PROJECT": "1000",
    }
    if mode == "up":
        port = free_port()
        env = {**engine_env, "CONVERGE_API_PORT": str(port), "CONVERGE_DATA_DIR": str(logs / "data")}
        env["CONVERGE_AMQP_URL"] = ""  # the in-process bus
        return [Service("up", ["converge", "up"], env, port, logs / "up.log", bin_dir(options))]
    services = []
    letters = "abcdefghij"
    for kind, count in (
        ("engine", options.engines),
        ("worker", options.workers),
        ("observer", options.observers),
    ):
        for letter in letters[:count]:
            port = free_port()
            if kind == "engine":
                env = {**engine_env, "CONVERGE_API_PORT": str(port)}
            else:
                env = {**common, "CONVERGE_HEALTH_PORT": str(port)}
            name = f"{kind}-{letter}"
            services.append(
                Service(name, [f"converge-{kind}"], env, port, logs / f"{name}.log", bin_dir(options))
            )
    return services


async def _start(services: list[Service], session: aiohttp.ClientSession) -> None:
    """Start every service and wait until each is ready; once more if one fails at start.

    (A broker busy with other test runs now and then closes a fresh connection
    with INTERNAL_ERROR; a second start is what an operator's supervisor would do.)
    """
    for attempt in (1, 2):
        for service in services:
            service.start()
        try:
            await asyncio.gather(*(service.ready(session) for service in services))
            return
        except (RuntimeError, TimeoutError) as exc:
            if attempt == 2:
                raise
            print(f"  ({exc}; starting again)", flush=True)
            await asyncio.gather(*(service.stop() for service in services))


@contextlib.asynccontextmanager
async def running(mode: str, options: Options) -> AsyncIterator[System]:
    """A fresh system in `mode` on its own database and queue prefix; all removed afterwards."""
    tag = uuid.uuid4().hex[:8]
    db_name, prefix = f"converge_bench_{tag}", f"converge-bench-{tag}"
    logs = Path(tempfile.mkdtemp(prefix=f"converge-bench-{mode}-"))
    database_url = await create_database(options.database_url, db_name)
    services: list[Service] = []
    failed = True
    try:
        migrate = await asyncio.to_thread(
            subprocess.run,
            [str(bin_dir(options) / "converge-engine"), "migrate"],
            env={
                **os.environ,
                **_common_env(database_url, prefix, options),
                "CONVERGE_DATABASE_URL": database_url,
            },
            capture_output=True,
            check=False,
        )
        if migrate.returncode != 0:
            raise RuntimeError(f"converge-engine migrate failed: {migrate.stdout[-2000:]!r}")
        services = _services(mode, database_url, prefix, options, logs)
        pool = await asyncpg.create_pool(database_url, min_size=1, max_size=3)
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:
                await _start(services, session)
                yield System(mode, database_url, prefix, session, pool, services)
                failed = False
        finally:
            await asyncio.gather(*(service.stop() for service in services))
            await pool.close()
    finally:
        await drop_database(options.database_url, db_name)
        if mode == "distributed":
            await delete_queues(options.amqp_url, prefix)
        if failed:
            print(f"  (service logs kept in {logs})", flush=True)
        else:
            shutil.rmtree(logs, ignore_errors=True)
