"""`converge up` stopped mid-operation (Ctrl-C or SIGKILL) carries the operation to its end
after a restart, with no further call: what the in-process bus held when it stopped is sent
again from the database at start-up. The security review's H1, as a test: an interrupted
create used to stay CREATE_IN_PROGRESS for good, and a cancelled one could not be deleted.
And a restart changes nothing in the sandbox cloud: stacks under observation see no drift.

Real: the `converge` executable (engine, worker, observer in one process, in-process bus),
PostgreSQL, HTTP, SIGINT and SIGKILL.
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.up_client import Restarts, UpClient
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

CHAINS, LENGTH = 4, 3
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def chains(wait: float) -> dict[str, Any]:
    """CHAINS chains of LENGTH test resources, each taking `wait` seconds to create."""
    resources: dict[str, Any] = {}
    for c in range(CHAINS):
        for i in range(LENGTH):
            resource: dict[str, Any] = {
                "type": "OS::Heat::TestResource",
                "properties": {"value": f"{c}.{i}", "wait_secs": wait},
            }
            if i:
                resource["depends_on"] = [f"r{c}{i - 1}"]
            resources[f"r{c}{i}"] = resource
    return {"heat_template_version": "2018-08-31", "resources": resources}


@pytest.fixture
async def ups(tmp_path: Path, database_url: str) -> AsyncIterator[Restarts]:
    async with aiohttp.ClientSession() as http:
        restarts = Restarts(tmp_path, database_url, http)
        try:
            yield restarts
        finally:
            await restarts.close()


async def midway(up: UpClient, stack_id: str) -> None:
    """Until some resources are created and others are being created."""

    async def seen() -> bool:
        states = {r["resource_status"] for r in await up.resources("h1", stack_id)}
        return {"CREATE_COMPLETE", "CREATE_IN_PROGRESS"} <= states

    await eventually(seen, timeout=60, every=0.1)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
async def test_an_interrupted_create_completes_after_a_restart_with_no_further_call(
    ups: Restarts, sig: signal.Signals
) -> None:
    up = await ups.start()
    stack_id = await up.create("h1", chains(wait=2))
    await midway(up, stack_id)
    await ups.stop(sig)

    up = await ups.start()
    assert await up.settled("h1", stack_id, timeout=60) == "CREATE_COMPLETE"
    resources = await up.resources("h1", stack_id)
    assert len(resources) == CHAINS * LENGTH
    assert {r["resource_status"] for r in resources} == {"CREATE_COMPLETE"}
    reasons = [e["resource_status_reason"] for e in await up.events("h1", stack_id)]
    assert any(r.startswith("Resumed after a restart; sent again:") for r in reasons), reasons


def nested(wait: float) -> dict[str, Any]:
    """Two child stacks (OS::Heat::Stack), each a chain of test resources; a group of two
    more; and a resource of the parent that waits for both children."""
    child = chains(wait)
    child["resources"] = {n: r for n, r in child["resources"].items() if n.startswith("r0")}
    return {
        "heat_template_version": "2018-08-31",
        "resources": {
            "a": {"type": "OS::Heat::Stack", "properties": {"template": child}},
            "b": {"type": "OS::Heat::Stack", "properties": {"template": child}},
            "group": {
                "type": "OS::Heat::ResourceGroup",
                "properties": {
                    "count": 2,
                    "resource_def": {"type": "OS::Heat::TestResource", "properties": {"wait_secs": wait}},
                },
            },
            "last": {
                "type": "OS::Heat::TestResource",
                "properties": {"wait_secs": wait},
                "depends_on": ["a", "b", "group"],
            },
        },
    }


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
async def test_an_interrupted_create_of_nested_stacks_completes_after_a_restart(
    ups: Restarts, sig: signal.Signals
) -> None:
    up = await ups.start()
    stack_id = await up.create("h1", nested(wait=1.5))

    async def children_busy() -> bool:
        data = await up.ok("GET", "/stacks?show_nested=true")
        busy: int = sum(s["stack_status"] == "CREATE_IN_PROGRESS" for s in data["stacks"])
        return busy >= 3

    await eventually(children_busy, timeout=60, every=0.1)
    await ups.stop(sig)

    up = await ups.start()
    assert await up.settled("h1", stack_id, timeout=90) == "CREATE_COMPLETE"
    data = await up.ok("GET", "/stacks?show_nested=true")
    assert {s["stack_status"] for s in data["stacks"]} == {"CREATE_COMPLETE"}
    assert len(data["stacks"]) == 4, "the parent, two children, the group's stack"


async def test_a_cancelled_create_whose_jobs_were_lost_is_deleted(ups: Restarts) -> None:
    up = await ups.start()
    stack_id = await up.create("h1", chains(wait=2))
    await midway(up, stack_id)
    await up.action("h1", stack_id, "cancel_without_rollback")
    assert await up.state("h1", stack_id) == "CREATE_FAILED"
    await ups.stop(signal.SIGINT)  # the cancelled create's resources are still being made

    up = await ups.start()
    await up.delete("h1", stack_id)
    assert await up.settled("h1", stack_id, timeout=60) == "DELETE_COMPLETE"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
async def test_observed_sandbox_stacks_see_no_drift_after_a_restart(
    ups: Restarts, sig: signal.Signals
) -> None:
    up = await ups.start()
    stack_id = await up.create("web", (EXAMPLES / "web-tier.yaml").read_text())
    assert await up.settled("web", stack_id, timeout=60) == "CREATE_COMPLETE"
    await up.action("web", stack_id, "observe_start", {"interval": 1})
    resources = len(await up.resources("web", stack_id))

    async def looked(rounds: int) -> bool:
        return await up.metric("converge_observer_looked_total", result="reported") >= rounds * resources

    await eventually(lambda: looked(1), timeout=60, every=0.2)
    await ups.stop(sig)

    up = await ups.start()
    await eventually(lambda: looked(3), timeout=60, every=0.2)  # three rounds since the restart
    observation = (await up.ok("GET", f"/stacks/web/{stack_id}/observation"))["observation"]
    assert observation["enabled"]
    assert observation["drifted"] == []
    statuses = {e["resource_status"] for e in await up.events("web", stack_id)}
    assert "OBSERVE_DRIFTED" not in statuses, statuses
