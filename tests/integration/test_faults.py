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
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from services.engine.goals import Goal
from tests.support import rabbit
from tests.support.fake_rest_api import FakeApi, serve
from tests.support.service_cluster import Driver, ServiceCluster, layered_template
from tests.support.service_cluster import check_world as check_layers
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

WIDTH, LAYERS = 20, 10  # 200 resources


@pytest.fixture
async def api() -> AsyncIterator[FakeApi]:
    async with serve(FakeApi()) as running:
        yield running


async def chaos(cluster: ServiceCluster, rng: random.Random, pool: asyncpg.Pool, stack_id: uuid.UUID) -> None:
    """Kill a random process each time the operation passes one of two seeded points
    of its progress (resources done), then at random moments, until it ends. The first
    kill follows progress, not the clock: however fast the services are, each operation
    is interrupted at least once (a restart waits until the process is ready again,
    and the operation may end meanwhile)."""
    action = await pool.fetchval("SELECT action FROM stacks WHERE stack_id = $1", stack_id)
    marks = sorted(rng.randrange(10, WIDTH * LAYERS * 3 // 4) for _ in range(2))
    while True:
        await asyncio.sleep(0.01 if marks else rng.uniform(0.2, 1.0))
        state = await pool.fetchval("SELECT status FROM stacks WHERE stack_id = $1", stack_id)
        if state != "IN_PROGRESS":
            return
        if marks:
            done = await pool.fetchval(
                """SELECT count(*) FROM events WHERE stack_id = $1 AND action = $2
                   AND status = 'COMPLETE' AND resource_type <> 'OS::Heat::Stack'""",
                stack_id,
                action,
            )
            if done < marks[0]:
                continue
            marks.pop(0)
        await cluster.kill_and_restart(rng.choice(sorted(cluster.specs)))


def template(api: FakeApi, generation: int) -> dict[str, Any]:
    return layered_template(api, width=WIDTH, layers=LAYERS, generation=generation)


def check_world(api: FakeApi, generation: int) -> None:
    check_layers(api, width=WIDTH, layers=LAYERS, generation=generation)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("seed", [1, 2])
async def test_killing_engines_workers_and_observers_loses_nothing(
    seed: int, database_url: str, amqp_url: str, queue_prefix: str, api: FakeApi
) -> None:
    rng = random.Random(seed)
    # The stack's whole history is checked below: no event cap (1,200+ events here).
    cluster = ServiceCluster(
        database_url=database_url,
        amqp_url=amqp_url,
        prefix=queue_prefix,
        env={"CONVERGE_MAX_EVENTS_PER_STACK": "0"},
    )
    driver = await Driver.open(database_url, amqp_url, queue_prefix)
    pool, ops, settled = driver.pool, driver.operations, driver.settled
    try:
        await cluster.start_all()
        stack = await ops.create(project_id="p", name="big", goal=Goal(template(api, 1)))
        await chaos(cluster, rng, pool, stack)
        assert await settled(stack) == ("CREATE", "COMPLETE", "Stack CREATE completed successfully")
        check_world(api, 1)
        assert len(api.created) == WIDTH * LAYERS, "no real resource was created twice"

        await ops.update(stack, Goal(template(api, 2)))
        await chaos(cluster, rng, pool, stack)
        assert (await settled(stack))[:2] == ("UPDATE", "COMPLETE")
        check_world(api, 2)
        assert len(api.created) == WIDTH * LAYERS, "updates apply in place, nothing re-created"

        await ops.delete(stack)
        await chaos(cluster, rng, pool, stack)
        assert (await settled(stack))[:2] == ("DELETE", "COMPLETE")
        assert api.items == {}, "nothing leaked"
        assert cluster.kills >= 3, "each operation was interrupted"
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
        await driver.close()


async def all_connected(cluster: ServiceCluster, name_contains: str, count: int) -> None:
    """Wait (bounded) until `count` broker connections match; fail at once if a service died."""

    async def connected() -> bool:
        assert not cluster.exited(), f"services died: {cluster.exited()}\n{cluster.output()}"
        listing = await asyncio.to_thread(rabbit.rabbitmqctl, "list_connections", "client_properties")
        return sum(name_contains in line for line in listing.splitlines()) >= count

    await eventually(connected, timeout=300, every=0.2, what=f"{count} connections of {name_contains}")


@pytest.mark.timeout(900)
async def test_dropping_every_broker_and_database_connection_mid_operation_loses_nothing(
    database_url: str, amqp_url: str, queue_prefix: str, api: FakeApi
) -> None:
    cluster = ServiceCluster(database_url=database_url, amqp_url=amqp_url, prefix=queue_prefix)
    # The driver's own connection is not one of the services' (it is not dropped).
    driver = await Driver.open(database_url, amqp_url, queue_prefix, connection_name="test-driver")
    pool, ops, settled = driver.pool, driver.operations, driver.settled
    try:
        await cluster.start_all()
        stack = await ops.create(project_id="p", name="big", goal=Goal(template(api, 1)))
        for _ in range(3):
            # The services reconnected after the last drop.
            await all_connected(cluster, f"{queue_prefix}:", 5)
            closed = await asyncio.to_thread(rabbit.close_connections, f"{queue_prefix}:")
            dropped = await pool.fetchval(
                """SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                   WHERE datname = current_database() AND application_name = 'converge-engine'"""
            )
            assert closed == 5
            assert dropped >= 1
        assert await settled(stack) == ("CREATE", "COMPLETE", "Stack CREATE completed successfully")
        check_world(api, 1)
        assert len(api.created) == WIDTH * LAYERS, "no real resource was created twice"
        assert all(
            p.process is not None and p.process.returncode is None for p in cluster.running.values()
        ), "every service reconnected instead of dying"
    finally:
        await cluster.stop()
        await driver.close()
