"""Heat parity (issue 20 item 4): OS::Heat::Delay, through python-heatclient.

Real: a Converge engine with its HTTP API on PostgreSQL (tests.support.convergence), the
worker (8 action slots) and the observer with the plugins; other resources live in the
test's pretend cloud (`Test::Thing`). Proves that a delay pauses what depends on it, that
it holds no worker slot while it waits (more delays than slots do not hold up anything
else), that `actions` chooses when it pauses (a delete), and that a delay longer than
the stack's timeout fails at once with the reason.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from services.engine.core.model import StackId
from tests.support import heat_parity
from tests.support.heat_parity import HeatClients
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

HOT = "2016-10-14"
SLOTS = 8  # the worker's concurrency in tests.support.convergence


@pytest.fixture
async def heat(database_url: str, tmp_path: Path) -> AsyncIterator[HeatClients]:
    async with heat_parity.serving(HeatClients, database_url, tmp_path) as running:
        yield running


def delay(min_wait: float, **more: Any) -> dict[str, Any]:
    return {"type": "OS::Heat::Delay", "properties": {"min_wait": min_wait, **more}}


async def statuses(heat: HeatClients, stack_id: str) -> dict[str, str]:
    listed = await heat.run(heat.hc.resources.list, stack_id)
    return {r.resource_name: r.resource_status for r in listed}


async def test_delays_hold_back_their_dependents_but_no_worker_slot(heat: HeatClients) -> None:
    waits = {f"wait{i}": delay(20) for i in range(SLOTS + 4)}
    free = {f"free{i}": {"type": "Test::Thing", "properties": {"value": f"f{i}"}} for i in range(SLOTS)}
    after = {"type": "Test::Thing", "properties": {"value": "after"}, "depends_on": ["wait0"]}
    template = {"heat_template_version": HOT, "resources": {**waits, **free, "after": after}}
    made = await heat.run(heat.hc.stacks.create, stack_name="paused", template=json.dumps(template))
    stack_id = made["stack"]["id"]

    async def free_done_while_waiting() -> bool:
        now = await statuses(heat, stack_id)
        # The worker handed every delay back to be watched (it holds none of them) ...
        watched = {r["name"] for r in await heat.cv.rows(StackId(uuid.UUID(stack_id))) if r["observing_job"]}
        done = watched >= set(waits) and all(now[name] == "CREATE_COMPLETE" for name in free)
        if done:  # ... and the rest ran while every delay is still pausing, holding back its dependent
            assert all(now[name] == "CREATE_IN_PROGRESS" for name in waits), now
            assert now["after"] == "INIT_COMPLETE", now
        return done

    # More delays than worker slots, all pausing: if a pause held a slot, nothing else could run.
    await eventually(free_done_while_waiting, timeout=15)
    stack = await heat.settled(stack_id)
    assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
    events = await heat.run(heat.hc.events.list, stack_id, resource_name="wait0")
    done = [e for e in events if e.resource_status == "CREATE_COMPLETE"]
    started = [e for e in await heat.run(heat.hc.events.list, stack_id, resource_name="after")]
    assert done, "the delay completed"
    assert started, "what depends on the delay was created after it"
    assert min(e.event_time for e in started) >= done[0].event_time
    assert sorted(heat.values()) == sorted(["after", *(f"f{i}" for i in range(SLOTS))])


async def test_a_delay_listed_for_delete_pauses_the_delete_and_not_the_create(heat: HeatClients) -> None:
    template = {
        "heat_template_version": HOT,
        "resources": {
            "pause": delay(2, max_jitter=1, jitter_multiplier=0.5, actions=["DELETE"]),
            "thing": {"type": "Test::Thing", "properties": {"value": "x"}, "depends_on": ["pause"]},
        },
    }
    made = await heat.run(heat.hc.stacks.create, stack_name="on-delete", template=json.dumps(template))
    stack_id = made["stack"]["id"]
    stack = await heat.settled(stack_id)
    assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
    await heat.run(heat.hc.stacks.delete, stack_id)

    async def pausing_after_its_dependent_went() -> bool:
        now = await statuses(heat, stack_id)
        return now.get("pause") == "DELETE_IN_PROGRESS"

    await eventually(pausing_after_its_dependent_went, timeout=10)
    assert heat.cv.world.live == {}, "a delete pauses after what depends on the delay is deleted"
    assert (await heat.cv.settled(StackId(uuid.UUID(stack_id)), timeout=30))[:2] == ("DELETE", "COMPLETE")


async def test_a_delay_longer_than_the_stack_timeout_fails_with_the_reason(heat: HeatClients) -> None:
    template = {"heat_template_version": HOT, "resources": {"pause": delay(90)}}
    made = await heat.run(
        heat.hc.stacks.create, stack_name="too-long", template=json.dumps(template), timeout_mins=1
    )
    stack = await heat.settled(made["stack"]["id"])
    assert stack.stack_status == "CREATE_FAILED"
    assert "OS::Heat::Delay delay of 90s exceeds the stack operation's timeout" in stack.stack_status_reason


async def test_a_delay_beyond_the_longest_is_refused_naming_the_property(heat: HeatClients) -> None:
    from heatclient import exc

    template = {"heat_template_version": HOT, "resources": {"pause": delay(40000, max_jitter=5000)}}
    with pytest.raises(exc.HTTPBadRequest) as refused:
        await heat.run(heat.hc.stacks.create, stack_name="forever", template=json.dumps(template))
    assert "resources.pause.properties" in str(refused.value)
    assert "45000s, more than the longest delay (43200s)" in str(refused.value)
