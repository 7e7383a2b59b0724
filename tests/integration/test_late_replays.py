"""A create job delivered again after its resource was deleted must not leak it.

That happens when an engine dies after publishing a job but before deleting
its outbox row: a live engine's relay publishes the *same* job again, maybe
long after the resource was created and deleted. The job's idempotency key
no longer names a live resource, so the replay creates a new one, which the
engine must reap as an orphan.

Real: PostgreSQL, the engine, worker and observer (in-process bus, no
disorder); the replayed job is the original one, rebuilt from the database.
The replay's result names a different physical resource than the first
run's, so its message id differs (`shared.protocol.result_id`) and the
engine's inbox lets it through to the reaper.
"""

from __future__ import annotations

import time

import pytest

from shared.protocol import JOBS_QUEUE, JobAction, ResourceJob
from tests.support.convergence import converge
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

TEMPLATE = {"heat_template_version": "2016-10-14", "resources": {"a": {"type": "Test::Thing"}}}


async def test_the_same_create_job_replayed_after_a_delete_leaks_nothing(database_url: str) -> None:
    async with converge(database_url, seed=0, duplicate_rate=0.0) as cv:
        stack = await cv.create("s", TEMPLATE)
        assert (await cv.settled(stack))[1] == "COMPLETE"
        (row,) = await cv.rows(stack)
        (job_id,) = [  # a worker's result is "<job_id>:result..."
            r["message_id"].split(":")[0]
            for r in await cv.pool.fetch("SELECT message_id FROM inbox")
            if ":result" in r["message_id"]
        ]
        await cv.delete(stack)
        assert (await cv.settled(stack))[1] == "COMPLETE"
        assert cv.world.live == {}
        replay = ResourceJob(
            job_id=job_id,
            stack_id=str(stack),
            stack_name="s",
            project_id=cv.project,
            traversal_id=str(row["traversal_id"]),
            resource_id=row["resource_id"],
            resource_name="a",
            resource_type="Test::Thing",
            action=JobAction.CREATE,
            properties={},
            deadline=time.time() + 60,
        )
        await cv.engine.bus.publish(JOBS_QUEUE, replay)
        await eventually(lambda: cv.world.created == 2)  # the replay created the resource again
        try:
            await eventually(lambda: not cv.world.live, timeout=5)  # reaping takes milliseconds
        except AssertionError:
            pytest.fail(f"leaked: {sorted(cv.world.live)}")
