"""PostgreSQL or RabbitMQ restarting mid-operation: every service reconnects by
itself and carries on, and nothing in flight is lost.

An engine started while both are down waits for them instead of exiting.

Real: a PostgreSQL server or a RabbitMQ node of the test's own (the shared ones
stay up for other tests), restarted under a 100-resource create; 2 engines,
2 workers and an observer as OS processes; a REST API on 127.0.0.1 managed
through Converge::HTTP::Resource is the real world. Resource creation is held
midway while the server goes down and released during the outage, so results
and observations arrive while it is away.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from services.engine.goals import Goal
from tests.support.fake_rest_api import FakeApi, serve
from tests.support.ports import free_port
from tests.support.private_servers import PrivatePostgres, PrivateRabbit
from tests.support.processes import ServiceProcess
from tests.support.service_cluster import (
    Driver,
    ServiceCluster,
    check_world,
    hold_creates_after,
    layered_template,
)
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

WIDTH, LAYERS = 10, 10  # 100 resources
OUTAGE = 2.0  # seconds the server stays down


@pytest.fixture
async def api() -> AsyncIterator[FakeApi]:
    async with serve(FakeApi()) as running:
        yield running


@pytest.fixture
async def postgres() -> AsyncIterator[PrivatePostgres]:
    server = await PrivatePostgres.start()
    try:
        yield server
    finally:
        await server.close()


@pytest.fixture
async def rabbit() -> AsyncIterator[PrivateRabbit]:
    node = await PrivateRabbit.start()
    try:
        yield node
    finally:
        await node.close()


def logged(cluster: ServiceCluster, name: str, event: str) -> bool:
    return bool(cluster.logged(name, lambda e: e.get("event") == event))


async def create_through_an_outage(
    driver: Driver,
    cluster: ServiceCluster,
    api: FakeApi,
    *,
    down: Callable[[], Awaitable[None]],
    up: Callable[[], Awaitable[None]],
) -> None:
    """Start the services and a create; hold creation midway, take the server
    `down`, let the held jobs finish while it is away, bring it `up` again; the
    create ends complete, the world matches it, and nobody gave up or died."""
    await cluster.start_all()
    template = layered_template(api, width=WIDTH, layers=LAYERS, generation=1)
    stack = await driver.operations.create(project_id="p", name="big", goal=Goal(template))
    gate = await hold_creates_after(api, 30)
    await down()
    gate.set()  # jobs finish while the server is away: their results must wait for it
    await asyncio.sleep(OUTAGE)  # the outage itself; nothing waits on a condition here
    await up()
    try:
        outcome = await driver.settled(stack, timeout=180)
    except AssertionError:  # it never settled (tests/support/waiting.py)
        letters = await driver.dead_letters()
        pytest.fail(f"the stack never settled; dead letters: {letters}\n{cluster.output()}")
    assert outcome == ("CREATE", "COMPLETE", "Stack CREATE completed successfully")
    check_world(api, width=WIDTH, layers=LAYERS, generation=1)
    assert len(api.created) == WIDTH * LAYERS, "no real resource was created twice"
    assert await driver.dead_letters() == [], "no message was given up on"
    assert cluster.exited() == {}, "every service reconnected instead of dying:\n" + cluster.output()


@pytest.mark.timeout(300)
async def test_a_postgresql_restart_mid_create_loses_nothing(
    postgres: PrivatePostgres, amqp_url: str, queue_prefix: str, api: FakeApi
) -> None:
    url = await postgres.create_database("converge")
    driver = await Driver.open(url, amqp_url, queue_prefix)
    cluster = ServiceCluster(database_url=url, amqp_url=amqp_url, prefix=queue_prefix)
    try:
        await create_through_an_outage(driver, cluster, api, down=postgres.crash, up=postgres.start_again)
        assert any(logged(cluster, name, "store_unavailable_handling") for name in cluster.running), (
            "engines handled messages during the outage, holding them until the database was back"
        )
    finally:
        await cluster.stop()
        await driver.close()


@pytest.mark.timeout(300)
async def test_a_rabbitmq_restart_mid_create_loses_nothing(
    rabbit: PrivateRabbit, database_url: str, api: FakeApi
) -> None:
    prefix = "restart"
    driver = await Driver.open(database_url, rabbit.url, prefix)
    cluster = ServiceCluster(database_url=database_url, amqp_url=rabbit.url, prefix=prefix)
    try:
        await create_through_an_outage(driver, cluster, api, down=rabbit.stop_app, up=rabbit.start_app)
        # The create may end before an idle service's next reconnection attempt (every 5 s).
        await eventually(
            lambda: all(logged(cluster, name, "amqp_reconnected") for name in cluster.running),
            timeout=60,
            what="every service lost its connection and made a new one",
        )
    finally:
        await cluster.stop()
        await driver.close()


@pytest.mark.timeout(300)
async def test_an_engine_started_before_its_database_and_broker_waits_for_them(
    postgres: PrivatePostgres, rabbit: PrivateRabbit
) -> None:
    url = await postgres.create_database("converge")
    engine = ServiceProcess(
        ["converge-engine"],
        {
            "CONVERGE_DATABASE_URL": url,
            "CONVERGE_AMQP_URL": rabbit.url,
            "CONVERGE_QUEUE_PREFIX": "late-start",
            # Picked while the broker holds its own port, so the two cannot be the same.
            "CONVERGE_API_PORT": str(free_port()),
            "CONVERGE_CONNECT_WAIT_SECONDS": "600",  # far beyond this test's own bounds
        },
    )
    await postgres.crash()
    await rabbit.stop_app()
    await engine.start()
    try:
        await engine.wait_for_event("waiting_for_postgresql")
        await postgres.start_again()
        await engine.wait_for_event("waiting_for_rabbitmq")
        await rabbit.start_app()
        await engine.wait_for_event("ready", timeout=120)
    finally:
        await engine.stop()
