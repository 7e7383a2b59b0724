"""The scenario library through RabbitMQ, every service its own process.

Real: PostgreSQL, RabbitMQ, 2 `converge-engine`, 2 `converge-worker` and a
`converge-observer` process, and a REST API on 127.0.0.1 managed through
Converge::HTTP::Resource as the real world (tests/support/distributed.py).
The test starts operations through the engine's operations layer.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import asyncpg
import pytest
import pytest_asyncio

from services.engine.convergence import Convergence
from services.engine.operations import Operations
from services.engine.store import connect
from services.engine.store.migrate import migrate
from shared.bus.amqp import AmqpBus
from tests.conftest import AMQP_URL, DB_URL, RUN_ID
from tests.scenarios.library import SCENARIOS
from tests.support.databases import create_database, drop_database
from tests.support.distributed import DistributedConverge
from tests.support.engine_settings import idle_engine
from tests.support.fake_rest_api import FakeApi, serve
from tests.support.harness import Harness
from tests.support.ports import free_port
from tests.support.processes import ServiceProcess
from tests.support.rabbit import delete_test_queues

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]


class Cluster:
    def __init__(
        self, operations: Operations, convergence: Convergence, pool: asyncpg.Pool, api: FakeApi
    ) -> None:
        self.operations, self.convergence, self.pool, self.api = operations, convergence, pool, api


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster() -> AsyncIterator[Cluster]:
    name = f"converge_test_{RUN_ID}_dist_{uuid.uuid4().hex[:6]}"
    url = await create_database(DB_URL, name)
    prefix = f"ctest-{RUN_ID}-dist-{uuid.uuid4().hex[:6]}"
    pool = await connect(url, size=4)
    async with pool.acquire() as conn:
        await migrate(conn)
    common = {"CONVERGE_AMQP_URL": AMQP_URL, "CONVERGE_QUEUE_PREFIX": prefix}
    plugin_env = {"CONVERGE_HTTP_ALLOWED_HOSTS": "127.0.0.1"}
    specs = [
        *[
            (
                ["converge-engine"],
                {**common, "CONVERGE_DATABASE_URL": url, "CONVERGE_API_PORT": str(free_port())},
            )
            for _ in range(2)
        ],
        *[
            (["converge-worker"], {**common, **plugin_env, "CONVERGE_HEALTH_PORT": str(free_port())})
            for _ in range(2)
        ],
        (["converge-observer"], {**common, **plugin_env, "CONVERGE_HEALTH_PORT": str(free_port())}),
    ]
    processes = [await ServiceProcess(argv, env).start() for argv, env in specs]
    bus = await AmqpBus.connect(AMQP_URL, prefix=prefix, connection_name=f"{prefix}:test")
    engine = idle_engine(pool, bus)
    try:
        for process in processes:
            await process.wait_for_event("ready", timeout=90)
        async with serve(FakeApi()) as api:
            yield Cluster(engine.operations, engine.convergence, pool, api)
    finally:
        for process in processes:
            await process.stop()
        await bus.close()
        await pool.close()
        await drop_database(DB_URL, name)
        await asyncio.to_thread(delete_test_queues, AMQP_URL, prefix)  # quorum queues pile up otherwise


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__ for s in SCENARIOS])
async def test_scenario(scenario: Callable[[Harness], Awaitable[None]], cluster: Cluster) -> None:
    harness = DistributedConverge(
        cluster.operations,
        cluster.convergence,
        cluster.pool,
        cluster.api,
        tag=uuid.uuid4().hex[:8],
    )
    await scenario(harness)
