"""Killing any process at any moment loses nothing: no operation lost, no real
resource leaked or duplicated.

Real: PostgreSQL, RabbitMQ, 2 engines, 2 workers and an observer as OS
processes, SIGKILLed at seeded random moments during a 200-resource create,
update and delete and started again; a REST API on 127.0.0.1 managed through
Converge::HTTP::Resource is the real world (it honours idempotency keys, as
real APIs do). The test starts operations through the engine's operations layer.
"""

from __future__ import annotations

import asyncio
import random
import signal
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from services.engine.definitions import DefinitionCache
from services.engine.operations import Goal, Operations
from services.engine.outbox import Outbox
from services.engine.store import Store, connect
from shared.bus.amqp import AmqpBus
from shared.plugins.registry import load_types
from tests.support import rabbit
from tests.support.fake_rest_api import FakeApi, serve
from tests.support.ports import free_port
from tests.support.processes import ServiceProcess

pytestmark = pytest.mark.integration

WIDTH, LAYERS = 20, 10  # 200 resources


class Cluster:
    def __init__(self, database_url: str, amqp_url: str, prefix: str) -> None:
        common = {
            "CONVERGE_AMQP_URL": amqp_url,
            "CONVERGE_QUEUE_PREFIX": prefix,
            "CONVERGE_DRAIN_SECONDS": "5",
        }
        plugins = {"CONVERGE_HTTP_ALLOWED_HOSTS": "127.0.0.1"}
        self.specs: dict[str, tuple[list[str], dict[str, str]]] = {
            "engine-a": (["converge-engine"], {**common, "CONVERGE_DATABASE_URL": database_url}),
            "engine-b": (["converge-engine"], {**common, "CONVERGE_DATABASE_URL": database_url}),
            "worker-a": (["converge-worker"], {**common, **plugins}),
            "worker-b": (["converge-worker"], {**common, **plugins}),
            "observer": (["converge-observer"], {**common, **plugins}),
        }
        self.running: dict[str, ServiceProcess] = {}
        self.kills = 0

    async def start(self, name: str) -> None:
        argv, env = self.specs[name]
        port_var = "CONVERGE_API_PORT" if argv[0] == "converge-engine" else "CONVERGE_HEALTH_PORT"
        process = await ServiceProcess(argv, {**env, port_var: str(free_port())}).start()
        await process.wait_for_event("ready", timeout=300)
        self.running[name] = process

    async def kill_and_restart(self, name: str) -> None:
        process = self.running[name]
        process.signal(signal.SIGKILL)
        await process.wait()
        self.kills += 1
        await self.start(name)

    async def stop(self) -> None:
        for process in self.running.values():
            await process.stop()


@pytest.fixture
async def api() -> AsyncIterator[FakeApi]:
    async with serve(FakeApi()) as running:
        yield running


def template(api: FakeApi, generation: int) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    for i in range(WIDTH * LAYERS):
        layer, position = divmod(i, WIDTH)
        body: dict[str, Any] = {"_name": f"r{i}", "generation": generation}
        if layer:
            body["parent"] = {"get_attr": [f"r{(layer - 1) * WIDTH + position}", "id"]}
        properties: dict[str, Any] = {"url": f"{api.base}/things", "body": body}
        if i % 5 == 0:
            properties["status_field"] = "status"  # finished by the observer
        resources[f"r{i}"] = {"type": "Converge::HTTP::Resource", "properties": properties}
    return {"heat_template_version": "2018-08-31", "resources": resources}


async def settled(pool: asyncpg.Pool, stack_id: uuid.UUID, timeout: float = 600) -> tuple[str, str, str]:
    async with asyncio.timeout(timeout):
        while True:
            row = await pool.fetchrow(
                "SELECT action, status, status_reason FROM stacks WHERE stack_id = $1", stack_id
            )
            if row["status"] != "IN_PROGRESS":
                return row["action"], row["status"], row["status_reason"]
            await asyncio.sleep(0.1)


async def chaos(cluster: Cluster, rng: random.Random, pool: asyncpg.Pool, stack_id: uuid.UUID) -> None:
    """Kill a random process at random moments until the operation ends."""
    while True:
        await asyncio.sleep(rng.uniform(0.2, 1.0))
        state = await pool.fetchval("SELECT status FROM stacks WHERE stack_id = $1", stack_id)
        if state != "IN_PROGRESS":
            return
        await cluster.kill_and_restart(rng.choice(sorted(cluster.specs)))


def check_world(api: FakeApi, generation: int) -> None:
    items = list(api.items.values())
    names = sorted(item["_name"] for item in items)
    assert names == sorted(f"r{i}" for i in range(WIDTH * LAYERS)), (
        "exactly one real resource per template resource"
    )
    by_name = {item["_name"]: item for item in items}
    for i in range(WIDTH, WIDTH * LAYERS):
        assert by_name[f"r{i}"]["parent"] == by_name[f"r{i - WIDTH}"]["id"]
    assert all(item["generation"] == generation for item in items)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("seed", [1, 2])
async def test_killing_engines_workers_and_observers_loses_nothing(
    seed: int, database_url: str, amqp_url: str, queue_prefix: str, api: FakeApi
) -> None:
    rng = random.Random(seed)
    cluster = Cluster(database_url, amqp_url, queue_prefix)
    pool = await connect(database_url, size=2)
    bus = await AmqpBus.connect(amqp_url, prefix=queue_prefix, connection_name=f"{queue_prefix}:test")
    try:
        await asyncio.gather(*(cluster.start(name) for name in cluster.specs))
        types = load_types()
        ops = Operations(
            store=Store(pool),
            outbox=Outbox(pool=pool, bus=bus),
            definitions=DefinitionCache(types=types),
            types=types,
        )
        stack = await ops.create(project_id="p", name="big", goal=Goal(template(api, 1)))
        await chaos(cluster, rng, pool, stack)
        assert await settled(pool, stack) == ("CREATE", "COMPLETE", "Stack CREATE completed successfully")
        check_world(api, 1)
        assert len(api.created) == WIDTH * LAYERS, "no real resource was created twice"

        await ops.update(stack, Goal(template(api, 2)))
        await chaos(cluster, rng, pool, stack)
        assert (await settled(pool, stack))[:2] == ("UPDATE", "COMPLETE")
        check_world(api, 2)
        assert len(api.created) == WIDTH * LAYERS, "updates apply in place, nothing re-created"

        await ops.delete(stack)
        await chaos(cluster, rng, pool, stack)
        assert (await settled(pool, stack))[:2] == ("DELETE", "COMPLETE")
        assert api.items == {}, "nothing leaked"
        assert cluster.kills >= 3
        stack_events = await pool.fetch(
            "SELECT action, status FROM events WHERE stack_id = $1 AND resource_type = 'OS::Heat::Stack' "
            "ORDER BY event_seq",
            stack,
        )
        assert [(e["action"], e["status"]) for e in stack_events] == [
            ("CREATE", "IN_PROGRESS"),
            ("CREATE", "COMPLETE"),
            ("UPDATE", "IN_PROGRESS"),
            ("UPDATE", "COMPLETE"),
            ("DELETE", "IN_PROGRESS"),
            ("DELETE", "COMPLETE"),
        ], "every stack event once, in order"
    finally:
        await cluster.stop()
        await bus.close()
        await pool.close()


async def all_connected(name_contains: str, count: int) -> None:
    async with asyncio.timeout(300):
        while True:
            listing = await asyncio.to_thread(rabbit.rabbitmqctl, "list_connections", "client_properties")
            if sum(name_contains in line for line in listing.splitlines()) >= count:
                return
            await asyncio.sleep(0.2)


@pytest.mark.timeout(900)
async def test_dropping_every_broker_and_database_connection_mid_operation_loses_nothing(
    database_url: str, amqp_url: str, queue_prefix: str, api: FakeApi
) -> None:
    cluster = Cluster(database_url, amqp_url, queue_prefix)
    pool = await connect(database_url, size=2)
    bus = await AmqpBus.connect(amqp_url, prefix=queue_prefix, connection_name="test-driver")
    try:
        await asyncio.gather(*(cluster.start(name) for name in cluster.specs))
        types = load_types()
        ops = Operations(
            store=Store(pool),
            outbox=Outbox(pool=pool, bus=bus),
            definitions=DefinitionCache(types=types),
            types=types,
        )
        stack = await ops.create(project_id="p", name="big", goal=Goal(template(api, 1)))
        for _ in range(3):
            await all_connected(f"{queue_prefix}:", 5)  # the services reconnected after the last drop
            closed = await asyncio.to_thread(rabbit.close_connections, f"{queue_prefix}:")
            dropped = await pool.fetchval(
                """SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                   WHERE datname = current_database() AND application_name = 'converge-engine'"""
            )
            assert closed == 5
            assert dropped >= 1
        assert await settled(pool, stack) == ("CREATE", "COMPLETE", "Stack CREATE completed successfully")
        check_world(api, 1)
        assert len(api.created) == WIDTH * LAYERS, "no real resource was created twice"
        assert all(
            p.process is not None and p.process.returncode is None for p in cluster.running.values()
        ), "every service reconnected instead of dying"
    finally:
        await cluster.stop()
        await bus.close()
        await pool.close()
