"""Converge's services as separate OS processes, for fault and recovery tests.

`ServiceCluster` runs named `converge-engine`, `converge-worker` and
`converge-observer` processes (tests/support/processes.py), kills them with
real signals and starts them again. `Driver` is the test's own engine core:
it starts stack operations through the operations layer and reads their
outcome from the database, riding out a database restart. The real world is
a `FakeApi` managed through `Converge::HTTP::Resource`; `layered_template`
and `check_world` build and check a layered stack of its items.
"""

from __future__ import annotations

import asyncio
import signal
import string
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import asyncpg

from services.engine.operations import Operations
from services.engine.store import connect
from services.engine.store.migrate import migrate
from shared.bus.amqp import AmqpBus
from shared.protocol import ENGINE_QUEUE, JOBS_QUEUE, OBSERVE_QUEUE
from tests.support.engine_settings import idle_engine
from tests.support.fake_rest_api import FakeApi
from tests.support.ports import free_port
from tests.support.processes import ServiceProcess
from tests.support.waiting import eventually, stack_settled

# What a database restart raises at a client polling it.
DATABASE_DOWN = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError)


class ServiceCluster:
    """`engines` engines, `workers` workers and `observers` observers, named
    `engine-a`, `engine-b`, ..., `worker-a`, ..., `observer-a`, ...; `env` is
    added to every process's environment."""

    def __init__(
        self,
        *,
        database_url: str,
        amqp_url: str,
        prefix: str,
        engines: int = 2,
        workers: int = 2,
        observers: int = 1,
        env: Mapping[str, str] | None = None,
    ) -> None:
        common = {
            "CONVERGE_AMQP_URL": amqp_url,
            "CONVERGE_QUEUE_PREFIX": prefix,
            "CONVERGE_DRAIN_SECONDS": "5",
            **(env or {}),
        }
        engine = {**common, "CONVERGE_DATABASE_URL": database_url}
        plugins = {**common, "CONVERGE_HTTP_ALLOWED_HOSTS": "127.0.0.1"}
        self.specs: dict[str, tuple[list[str], dict[str, str]]] = {}
        for kind, count, env in (
            ("engine", engines, engine),
            ("worker", workers, plugins),
            ("observer", observers, plugins),
        ):
            for letter in string.ascii_lowercase[:count]:
                self.specs[f"{kind}-{letter}"] = ([f"converge-{kind}"], env)
        self.running: dict[str, ServiceProcess] = {}
        self.retired: list[tuple[str, ServiceProcess]] = []  # killed processes, for their logs
        self.kills = 0

    async def start(self, name: str) -> None:
        argv, env = self.specs[name]
        port_var = "CONVERGE_API_PORT" if argv[0] == "converge-engine" else "CONVERGE_HEALTH_PORT"
        process = await ServiceProcess(argv, {**env, port_var: str(free_port())}).start()
        self.running[name] = process
        await process.wait_for_event("ready", timeout=120)

    async def start_all(self) -> None:
        await asyncio.gather(*(self.start(name) for name in self.specs))

    async def kill(self, name: str) -> None:
        """SIGKILL `name` and wait for it to be gone."""
        process = self.running.pop(name)
        process.signal(signal.SIGKILL)
        await process.wait()
        self.retired.append((name, process))
        self.kills += 1

    async def kill_and_restart(self, name: str) -> None:
        await self.kill(name)
        await self.start(name)

    def api_url(self, name: str) -> str:
        """The HTTP API of engine `name`."""
        return f"http://127.0.0.1:{self.running[name].env['CONVERGE_API_PORT']}"

    def exited(self) -> dict[str, int]:
        """Processes that ended by themselves, with their exit codes (none = all running)."""
        return {
            name: process.process.returncode
            for name, process in self.running.items()
            if process.process is not None and process.process.returncode is not None
        }

    def logged(self, name: str, matches: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        return [event for event in self.running[name].events if matches(event)]

    async def wait_logged(
        self, names: list[str], matches: Callable[[dict[str, Any]], bool], *, timeout: float = 60
    ) -> str:
        """Wait (bounded) until one of `names` logs an event that `matches`; its name."""
        async with asyncio.timeout(timeout):
            while True:
                for name in names:
                    if self.logged(name, matches):
                        return name
                await asyncio.sleep(0.05)

    def logs(self, kind: str) -> dict[str, list[dict[str, Any]]]:
        """Log events of each process of `kind` ("engine", ...), a restarted one's
        under its name, its earlier lives first."""
        logs: dict[str, list[dict[str, Any]]] = {}
        for name, process in [*self.retired, *self.running.items()]:
            if name.startswith(f"{kind}-"):
                logs.setdefault(name, []).extend(process.events)
        return logs

    def output(self) -> str:
        return "\n\n".join(f"== {name}\n{p.output()}" for name, p in self.running.items())

    async def stop(self) -> None:
        for process in self.running.values():
            await process.stop()


@dataclass
class Driver:
    """The test's own engine core: operations in, outcomes read from the database."""

    pool: asyncpg.Pool
    bus: AmqpBus
    operations: Operations

    @classmethod
    async def open(
        cls, database_url: str, amqp_url: str, prefix: str, *, connection_name: str | None = None
    ) -> Driver:
        """`connection_name`: the broker connection's name (default `<prefix>:test-driver`)."""
        pool = await connect(database_url, size=2)
        async with pool.acquire() as conn:
            await migrate(conn)
        name = connection_name or f"{prefix}:test-driver"
        bus = await AmqpBus.connect(amqp_url, prefix=prefix, connection_name=name)
        return cls(pool, bus, idle_engine(pool, bus).operations)

    async def settled(self, stack_id: uuid.UUID, *, timeout: float = 600) -> tuple[str, str, str]:
        """Wait (bounded) until the stack's operation ended, through database outages."""
        return await stack_settled(self.pool, stack_id, timeout=timeout, every=0.1, unavailable=DATABASE_DOWN)

    async def dead_letters(self) -> list[str]:
        """Every queue's dead letters as `queue: error` (taken off the queues)."""
        letters: list[str] = []
        for queue in (ENGINE_QUEUE, JOBS_QUEUE, OBSERVE_QUEUE):
            letters += [f"{d.queue}: {d.error}" for d in await self.bus.dead_letters(queue)]
        return letters

    async def close(self) -> None:
        await self.bus.close()
        await self.pool.close()


def layered_template(api: FakeApi, *, width: int, layers: int, generation: int) -> dict[str, Any]:
    """`width * layers` items; each below the first layer records its parent's id,
    and one in five has a status the observer watches until it is ready."""
    resources: dict[str, Any] = {}
    for i in range(width * layers):
        layer, position = divmod(i, width)
        body: dict[str, Any] = {"_name": f"r{i}", "generation": generation}
        if layer:
            body["parent"] = {"get_attr": [f"r{(layer - 1) * width + position}", "id"]}
        properties: dict[str, Any] = {"url": f"{api.base}/things", "body": body}
        if i % 5 == 0:
            properties["status_field"] = "status"  # finished by the observer
        resources[f"r{i}"] = {"type": "Converge::HTTP::Resource", "properties": properties}
    return {"heat_template_version": "2018-08-31", "resources": resources}


def check_world(api: FakeApi, *, width: int, layers: int, generation: int) -> None:
    """Exactly one real item per template resource, each linked to its parent."""
    items = list(api.items.values())
    names = sorted(item["_name"] for item in items)
    assert names == sorted(f"r{i}" for i in range(width * layers)), (
        "exactly one real resource per template resource"
    )
    by_name = {item["_name"]: item for item in items}
    for i in range(width, width * layers):
        assert by_name[f"r{i}"]["parent"] == by_name[f"r{i - width}"]["id"]
    assert all(item["generation"] == generation for item in items)


async def hold_creates_after(api: FakeApi, count: int, *, timeout: float = 120) -> asyncio.Event:
    """Once `count` POSTs have started, hold every later one until the returned gate is set."""
    await eventually(lambda: api.posts_started >= count, timeout=timeout, every=0.01)
    api.create_gate = asyncio.Event()
    return api.create_gate
