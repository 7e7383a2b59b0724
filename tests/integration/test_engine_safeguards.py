"""Engine safeguards: a stack that stops moving is reported (an event naming what is
still running and what was sent again, a log line, a metric) and its work in flight is
sent again, the orphan of a late replayed job is deleted, and the janitor keeps
superseded traversals and handled message ids for the ages it is set to.

Real: PostgreSQL, the engine, worker and observer (in-process bus). Also: orphans of late
replayed jobs are cleaned up.
"""

from __future__ import annotations

import pytest

from tests.support.convergence import converge
from tests.support.engine_settings import engine_settings
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


async def test_a_stack_with_no_progress_is_reported_with_what_is_running_and_sent_again(
    database_url: str,
) -> None:
    stuck = {"type": "OS::Heat::TestResource", "properties": {"action_wait_secs": {"create": 600}}}
    template = {"heat_template_version": "2016-10-14", "resources": {"stuck": stuck}}
    async with converge(
        database_url, seed=0, duplicate_rate=0.0, settings=engine_settings(stall_seconds=0.5)
    ) as cv:
        stack = await cv.create("s", template)
        # until the stack has been quiet for the stall time
        await eventually(cv.engine.report_stalled, every=0.1)
        reports = [e for e in await cv.events(stack) if e["reason"].startswith("No progress for")]
        assert len(reports) == 1
        # The worker answered "in progress": an observer is asked to watch it again.
        assert (
            reports[0]["reason"] == "No progress for 0s; still in progress: stuck; sent again: 1 observation"
        )
        assert (reports[0]["action"], reports[0]["status"]) == ("CREATE", "IN_PROGRESS")
        assert await cv.engine.report_stalled() == 0, "the report itself counts as news for one period"
        assert await cv.state(stack) == ("CREATE", "IN_PROGRESS"), "the resource is still being built"


async def test_a_late_replayed_create_is_undone_so_nothing_leaks(database_url: str) -> None:
    """A create job delivered again after its resource was deleted (an outbox re-publish
    after an engine died) re-creates it; the engine deletes that orphan."""
    import time
    import uuid

    from shared.protocol import JOBS_QUEUE, JobAction, ResourceJob

    template = {"heat_template_version": "2016-10-14", "resources": {"a": {"type": "Test::Thing"}}}
    async with converge(database_url, seed=0, duplicate_rate=0.0) as cv:
        stack = await cv.create("s", template)
        await cv.settled(stack)
        resource_id = (await cv.rows(stack))[0]["resource_id"]
        await cv.delete(stack)
        await cv.settled(stack)
        assert cv.world.live == {}
        replay = ResourceJob(
            job_id=uuid.uuid4().hex,
            stack_id=str(stack),
            stack_name="s",
            project_id="p1",
            traversal_id=str(uuid.uuid4()),
            resource_id=resource_id,
            resource_name="a",
            resource_type="Test::Thing",
            action=JobAction.CREATE,
            properties={},
            deadline=time.time() + 60,
        )
        await cv.engine.bus.publish(JOBS_QUEUE, replay)
        await eventually(
            lambda: cv.world.created == 2 and not cv.world.live, every=0.02
        )  # again, then reaped
        assert cv.world.deleted == 2


async def test_the_janitor_drops_superseded_traversals_and_handled_ids_only_past_their_ages(
    database_url: str,
) -> None:
    """What `prune` is given comes from CONVERGE_TRAVERSAL_KEEP_SECONDS and
    CONVERGE_INBOX_KEEP_SECONDS: younger rows stay, the stack's current traversal always."""

    def template(value: str) -> dict[str, object]:
        thing = {"type": "Test::Thing", "properties": {"value": value}}
        return {"heat_template_version": "2016-10-14", "resources": {"a": thing}}

    quiet_janitor = engine_settings(prune_seconds=3600)  # only this test prunes
    async with converge(database_url, seed=0, duplicate_rate=0.0, settings=quiet_janitor) as cv:
        stack = await cv.create("s", template("one"))
        await cv.settled(stack)
        await cv.update(stack, template("two"))
        await cv.settled(stack)
        assert await cv.pool.fetchval("SELECT count(*) FROM traversals WHERE stack_id = $1", stack) == 2
        store = cv.engine.store
        assert await store.prune(inbox_seconds=3600, traversal_seconds=3600) == (0, 0), "all young"
        aged = await cv.pool.fetch(
            "UPDATE inbox SET processed_at = processed_at - interval '2 hours' RETURNING message_id"
        )
        await cv.pool.execute("UPDATE traversals SET created_at = created_at - interval '2 minutes'")
        assert aged, "the stack's messages were handled"
        assert await store.prune(inbox_seconds=3 * 3600, traversal_seconds=3600) == (0, 0), "not old enough"
        assert await store.prune(inbox_seconds=3600, traversal_seconds=60) == (1, len(aged))
        kept = await cv.pool.fetch("SELECT traversal_id FROM traversals WHERE stack_id = $1", stack)
        current = await cv.pool.fetchval("SELECT current_traversal FROM stacks WHERE stack_id = $1", stack)
        assert [row["traversal_id"] for row in kept] == [current]
