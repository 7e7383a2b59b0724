"""A stack that stops moving is reported: an event naming what is still running, a log
line and a metric, again each stall period while it stays stuck.

Real: PostgreSQL, the engine, worker and observer (in-process bus).
"""

from __future__ import annotations

import asyncio

import pytest

from tests.support.convergence import converge

pytestmark = pytest.mark.integration


async def test_a_stack_with_no_progress_is_reported_with_what_is_running(database_url: str) -> None:
    stuck = {"type": "OS::Heat::TestResource", "properties": {"action_wait_secs": {"create": 600}}}
    template = {"heat_template_version": "2016-10-14", "resources": {"stuck": stuck}}
    async with converge(database_url, seed=0, duplicate_rate=0.0, stall_seconds=0.5) as cv:
        stack = await cv.create("s", template)
        async with asyncio.timeout(30):
            while True:  # until the stack has been quiet for the stall time
                if await cv.engine.report_stalled():
                    break
                await asyncio.sleep(0.1)
        reports = [e for e in await cv.events(stack) if e["reason"].startswith("No progress for")]
        assert len(reports) == 1
        assert reports[0]["reason"] == "No progress for 0s; still in progress: stuck"
        assert (reports[0]["action"], reports[0]["status"]) == ("CREATE", "IN_PROGRESS")
        assert await cv.engine.report_stalled() == 0, "the report itself counts as news for one period"
        assert await cv.state(stack) == ("CREATE", "IN_PROGRESS"), "reporting changes nothing"
