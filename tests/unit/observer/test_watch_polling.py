"""Proves when the observer looks again at a resource still in progress: when the
plugin says (its `retry_after`), else with growing pauses; on virtual time."""

from __future__ import annotations

from typing import Any

import pytest
import structlog

from services.observer.completion import PollPolicy, watch
from shared.plugins import Observation, ObservedState
from shared.plugins.builtin.testresource import TestResource
from shared.plugins.runtime import PluginRuntime, action_context, validate_properties
from shared.protocol import JobAction, JobOutcome, ObserveRequest, ResourceJob
from tests.unit.plugins.plugin_fakes import VirtualClock

log = structlog.get_logger()


class Sleeps:
    """The runtime's sleep: advances the virtual clock and records each pause."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.pauses: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.clock.advance(seconds)


def create_job(
    clock: VirtualClock, properties: dict[str, Any], physical_id: str | None = None
) -> ResourceJob:
    return ResourceJob(
        job_id="job-1",
        stack_id="s",
        stack_name="s",
        project_id="p",
        traversal_id="t",
        resource_id=1,
        resource_name="slow",
        resource_type=TestResource.type_name,
        action=JobAction.CREATE,
        physical_id=physical_id,
        properties=properties,
        deadline=clock() + 600,
    )


async def test_a_resource_that_knows_when_it_is_ready_is_looked_at_again_exactly_then() -> None:
    clock = VirtualClock()
    sleeps = Sleeps(clock)
    runtime = PluginRuntime(types={TestResource.type_name: TestResource}, clock=clock, sleep=sleeps)
    props = {"action_wait_secs": {"create": 1}}
    job = create_job(clock, props)
    ctx = action_context(job, runtime, log)
    created = await TestResource().create(ctx, validate_properties(TestResource.properties, props, "p"))
    clock.advance(0.05)  # the result travelled to the engine, the request to the observer

    watched = ObserveRequest(job=create_job(clock, props, created.physical_id))
    result = await watch(watched, runtime=runtime, log=log)

    assert result.outcome is JobOutcome.COMPLETE
    assert sleeps.pauses == [pytest.approx(0.95, abs=1e-6)]  # one look too early, then on time


def test_without_a_hint_the_pauses_grow_to_the_cap() -> None:
    policy = PollPolicy(first=0.1, factor=2.0, cap=0.5)
    guessing = Observation(ObservedState.IN_PROGRESS)
    waits, pause = [], policy.first
    for _ in range(5):
        wait, pause = policy.after(guessing, pause)
        waits.append(wait)
    assert waits == [0.1, 0.2, 0.4, 0.5, 0.5]


def test_a_hint_is_followed_within_the_floor_and_the_cap() -> None:
    policy = PollPolicy(cap=5.0, floor=0.005)
    hinted = [
        Observation(ObservedState.IN_PROGRESS, retry_after=after) for after in (0.0, float("inf"), 1.25)
    ]
    assert [policy.after(o, 0.1) for o in hinted] == [(0.005, 0.1), (5.0, 0.1), (1.25, 0.1)]
