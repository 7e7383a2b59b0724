"""What a plugin's ResourceGone means for each action: an update replaces (the resource is
made anew), a delete is done, a check reports the resource gone, the rest fail. Pure: a
plugin of the test's own raises it; `run_job` runs on virtual time, no I/O."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import structlog

from services.worker.runner import run_job
from shared.plugins import (
    ActionContext,
    ActionResult,
    Observation,
    ObservedState,
    Properties,
    ResourceGone,
    ResourceType,
)
from shared.plugins.runtime import PluginRuntime
from shared.protocol import JobAction, JobOutcome, ResourceJob


class Vanished(ResourceType):
    """Every action finds the resource gone."""

    type_name = "Test::Vanished"

    async def create(self, ctx: ActionContext, props: Properties) -> ActionResult:
        raise ResourceGone("the parent of the new resource is gone")

    async def update(
        self, ctx: ActionContext, physical_id: str, old: Properties, new: Properties
    ) -> ActionResult:
        raise ResourceGone(f"{physical_id} returned 404")

    async def delete(self, ctx: ActionContext, physical_id: str, props: Properties) -> ActionResult:
        raise ResourceGone(f"{physical_id} returned 404")

    async def observe(self, ctx: ActionContext, physical_id: str, props: Properties) -> Observation:
        return Observation(ObservedState.GONE, reason=f"{physical_id} returned 404")

    async def suspend(self, ctx: ActionContext, physical_id: str, props: Properties) -> ActionResult:
        raise ResourceGone(f"{physical_id} returned 404")


async def run(action: JobAction, **fields: Any) -> Any:
    job = ResourceJob(
        job_id="j-1",
        stack_id="s",
        stack_name="s",
        project_id="p",
        traversal_id="t",
        resource_id=1,
        resource_name="r",
        resource_type="Test::Vanished",
        action=action,
        physical_id=fields.pop("physical_id", "x-1"),
        deadline=1e12,
        **fields,
    )

    async def no_sleep(_: float) -> None:
        await asyncio.sleep(0)

    runtime = PluginRuntime(types={"Test::Vanished": Vanished}, clock=lambda: 0.0, sleep=no_sleep)
    return await run_job(job, deps=runtime, log=structlog.get_logger())


@pytest.mark.parametrize(
    ("action", "outcome"),
    [
        (JobAction.UPDATE, JobOutcome.REPLACE),
        (JobAction.DELETE, JobOutcome.COMPLETE),
        (JobAction.CHECK, JobOutcome.GONE),
        (JobAction.CREATE, JobOutcome.FAILED),
        (JobAction.SUSPEND, JobOutcome.FAILED),
    ],
)
async def test_a_resource_found_gone_means_what_the_action_makes_of_it(
    action: JobAction, outcome: JobOutcome
) -> None:
    result = await run(action)
    assert result.outcome is outcome
    assert result.physical_id == "x-1"
    if outcome is JobOutcome.FAILED:
        assert result.reason.startswith(f"Resource {action.value.upper()} failed: ")
    if outcome in (JobOutcome.REPLACE, JobOutcome.GONE):
        assert "404" in result.reason


async def test_a_delete_of_what_was_never_created_needs_no_properties() -> None:
    class Strict(Properties):
        url: str

    class NeedsUrl(Vanished):
        properties = Strict

    job_types = {"Test::Vanished": NeedsUrl}
    job = ResourceJob(
        job_id="j-2",
        stack_id="s",
        stack_name="s",
        project_id="p",
        traversal_id="t",
        resource_id=1,
        resource_name="r",
        resource_type="Test::Vanished",
        action=JobAction.DELETE,
        deadline=1e12,
    )
    result = await run_job(
        job, deps=PluginRuntime(types=job_types, clock=lambda: 0.0), log=structlog.get_logger()
    )
    assert result.outcome is JobOutcome.COMPLETE
