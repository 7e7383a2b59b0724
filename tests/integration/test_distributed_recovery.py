"""Distributed mode: an operation whose messages were lost is moved on by an engine's
recovery and completes. Nothing in the database is lost, only messages (a purged queue:
an operator's mistake, a broker that lost its disk), so "nothing moving" is decided by
time: a stack with no progress for the stall time has its lost checks and its jobs sent
again, and the recovery is reported as an event.

Real: PostgreSQL, RabbitMQ, an engine, a worker and an observer as OS processes (stall
time 2 s), queues purged over AMQP; a REST API on 127.0.0.1 managed through
Converge::HTTP::Resource is the real world (it honours Idempotency-Key).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from services.engine.goals import Goal
from shared.protocol import ENGINE_QUEUE, JOBS_QUEUE
from tests.support import rabbit
from tests.support.fake_rest_api import FakeApi, serve
from tests.support.service_cluster import Driver, ServiceCluster, check_world, layered_template
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

WIDTH, LAYERS = 5, 3
STALL = {"CONVERGE_STALL_SECONDS": "2", "CONVERGE_STALL_CHECK_SECONDS": "0.5"}


@pytest.fixture
async def api() -> AsyncIterator[FakeApi]:
    async with serve(FakeApi()) as running:
        yield running


@pytest.mark.timeout(300)
async def test_an_operation_whose_checks_and_jobs_were_lost_is_moved_on_and_completes(
    database_url: str, amqp_url: str, queue_prefix: str, api: FakeApi
) -> None:
    cluster = ServiceCluster(
        database_url=database_url,
        amqp_url=amqp_url,
        prefix=queue_prefix,
        engines=1,
        workers=1,
        observers=1,
        env=STALL,
    )
    driver = await Driver.open(database_url, amqp_url, queue_prefix)
    try:
        template = layered_template(api, width=WIDTH, layers=LAYERS, generation=1)
        stack = await driver.operations.create(project_id="p", name="lost", goal=Goal(template))
        # No engine runs yet: the checks of the leaves wait in the engine queue. Lose them.
        assert await rabbit.purge_queue(amqp_url, f"{queue_prefix}.{ENGINE_QUEUE}") == WIDTH
        assert await driver.bus.depth(ENGINE_QUEUE) == 0

        await cluster.start("engine-a")  # finds the stack stalled, checks the leaves again

        async def jobs_queued() -> bool:
            return await driver.bus.depth(JOBS_QUEUE) >= WIDTH

        await eventually(jobs_queued, timeout=60, every=0.1)  # no worker yet: lose the jobs too
        # No depth check after this purge: the engine's recovery may already be sending the
        # jobs again (2 s without progress), which is the behaviour under test.
        assert await rabbit.purge_queue(amqp_url, f"{queue_prefix}.{JOBS_QUEUE}") >= WIDTH
        await cluster.start("worker-a")
        await cluster.start("observer-a")

        assert await driver.settled(stack, timeout=120) == (
            "CREATE",
            "COMPLETE",
            "Stack CREATE completed successfully",
        )
        check_world(api, width=WIDTH, layers=LAYERS, generation=1)
        assert len(api.created) == WIDTH * LAYERS, "no item was created twice"
        reports = await driver.pool.fetch(
            """SELECT reason FROM events WHERE stack_id = $1 AND reason LIKE 'No progress for%'
               ORDER BY event_seq""",
            stack,
        )
        sent = [r["reason"].split("sent again: ")[-1] for r in reports]
        assert sent[0] == f"{WIDTH} checks", sent
        assert f"{WIDTH} jobs" in sent, sent
        assert await driver.dead_letters() == []
    finally:
        await cluster.stop()
        await driver.close()
