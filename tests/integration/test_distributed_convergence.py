"""Convergence across separate processes: 2 engines, 2 workers, an observer, over RabbitMQ.

Real: PostgreSQL, RabbitMQ, every service as its own OS process, and a REST
API on 127.0.0.1 managed through Converge::HTTP::Resource (its items are the
real world the test checks). The test starts operations through the engine's
operations layer in-process (the HTTP API in front of it is tested by
tests/integration/test_api.py); the processes do all the convergence work.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from services.engine.goals import Goal
from services.engine.operations import Operations
from services.engine.store import connect
from shared.bus.amqp import AmqpBus
from tests.support.engine_settings import idle_engine
from tests.support.fake_rest_api import FakeApi, serve
from tests.support.ports import free_port
from tests.support.processes import ServiceProcess
from tests.support.waiting import stack_settled

pytestmark = pytest.mark.integration


@pytest.fixture
async def api() -> AsyncIterator[FakeApi]:
    async with serve(FakeApi()) as running:
        yield running


@pytest.fixture
async def cluster(database_url: str, amqp_url: str, queue_prefix: str) -> AsyncIterator[list[ServiceProcess]]:
    common = {"CONVERGE_AMQP_URL": amqp_url, "CONVERGE_QUEUE_PREFIX": queue_prefix}
    engine_env = {**common, "CONVERGE_DATABASE_URL": database_url}
    specs = [
        (["converge-engine"], {**engine_env, "CONVERGE_API_PORT": str(free_port())}),
        (["converge-engine"], {**engine_env, "CONVERGE_API_PORT": str(free_port())}),
        *[
            (
                ["converge-worker"],
                {
                    **common,
                    "CONVERGE_HEALTH_PORT": str(free_port()),
                    "CONVERGE_HTTP_ALLOWED_HOSTS": "127.0.0.1",
                },
            )
            for _ in range(2)
        ],
        (
            ["converge-observer"],
            {**common, "CONVERGE_HEALTH_PORT": str(free_port()), "CONVERGE_HTTP_ALLOWED_HOSTS": "127.0.0.1"},
        ),
    ]
    processes = [await ServiceProcess(argv, env).start() for argv, env in specs]
    try:
        for process in processes:
            await process.wait_for_event("ready", timeout=90)
        yield processes
    finally:
        for process in processes:
            await process.stop()


@pytest.fixture
async def operations(
    database_url: str, amqp_url: str, queue_prefix: str, cluster: list[ServiceProcess]
) -> AsyncIterator[tuple[Operations, asyncpg.Pool]]:
    pool = await connect(database_url, size=2)
    bus = await AmqpBus.connect(amqp_url, prefix=queue_prefix, connection_name=f"{queue_prefix}:test")
    yield idle_engine(pool, bus).operations, pool
    await bus.close()
    await pool.close()


async def settled(pool: asyncpg.Pool, stack_id: uuid.UUID) -> tuple[str, str, str]:
    return await stack_settled(pool, stack_id, timeout=60)


def web_tier(api: FakeApi, *, size: int, name: str, servers: int) -> dict[str, Any]:
    url = f"{api.base}/things"

    def item(body: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {"type": "Converge::HTTP::Resource", "properties": {"url": url, "body": body, **extra}}

    resources: dict[str, Any] = {
        "net": item({"kind": "net", "size": size}, replace_on_change=["size"]),
        "subnet": item({"kind": "subnet", "net": {"get_attr": ["net", "id"]}}),
        "lb": item(
            {"kind": "lb", "name": name, "subnet": {"get_attr": ["subnet", "id"]}}, status_field="status"
        ),
    }
    for i in range(servers):
        resources[f"server{i}"] = item(
            {"kind": "server", "subnet": {"get_attr": ["subnet", "id"]}, "lb": {"get_resource": "lb"}}
        )
    return {"heat_template_version": "2018-08-31", "resources": resources}


def kinds(api: FakeApi) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in api.items.values():
        counts[item["kind"]] = counts.get(item["kind"], 0) + 1
    return counts


async def test_create_update_replace_and_delete_across_processes(
    operations: tuple[Operations, asyncpg.Pool], api: FakeApi, cluster: list[ServiceProcess]
) -> None:
    ops, pool = operations
    api.create_status = "BUILD"  # the load balancer becomes ACTIVE only when the test says so

    async def activate_lb() -> None:
        while True:
            for item in api.items.values():
                if item.get("status") == "BUILD":
                    item["status"] = "ACTIVE"
            await asyncio.sleep(0.05)

    activator = asyncio.create_task(activate_lb())
    try:
        stack = await ops.create(
            project_id="p", name="web", goal=Goal(web_tier(api, size=1, name="a", servers=4))
        )
        assert await settled(pool, stack) == ("CREATE", "COMPLETE", "Stack CREATE completed successfully")
        assert kinds(api) == {"net": 1, "subnet": 1, "lb": 1, "server": 4}
        net = next(i for i in api.items.values() if i["kind"] == "net")
        subnet = next(i for i in api.items.values() if i["kind"] == "subnet")
        assert subnet["net"] == net["id"]

        await ops.update(stack, Goal(web_tier(api, size=1, name="b", servers=2)))
        assert (await settled(pool, stack))[1] == "COMPLETE"
        assert kinds(api) == {"net": 1, "subnet": 1, "lb": 1, "server": 2}
        assert next(i for i in api.items.values() if i["kind"] == "lb")["name"] == "b"

        await ops.update(stack, Goal(web_tier(api, size=2, name="b", servers=2)))
        assert (await settled(pool, stack))[1] == "COMPLETE"
        new_net = next(i for i in api.items.values() if i["kind"] == "net")
        assert new_net["id"] != net["id"], "a change of size replaces the network"
        assert next(i for i in api.items.values() if i["kind"] == "subnet")["net"] == new_net["id"]
        assert kinds(api) == {"net": 1, "subnet": 1, "lb": 1, "server": 2}

        await ops.delete(stack)
        assert (await settled(pool, stack))[1] == "COMPLETE"
        assert api.items == {}
    finally:
        activator.cancel()
    handled_by = {p.argv[0] for p in cluster for e in p.events if e.get("event") in ("check", "cleanup")}
    assert handled_by == {"converge-engine"}
    engines_that_worked = [
        p
        for p in cluster
        if p.argv[0] == "converge-engine" and any(e.get("event") == "check" for e in p.events)
    ]
    assert len(engines_that_worked) == 2, "both engines took checks"
