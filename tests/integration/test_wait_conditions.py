"""Wait conditions complete from signals posted to their handle's URL, fail on a
FAILURE signal, and time out.

Real: the engine's HTTP app over real HTTP, PostgreSQL, engine, worker and
observer (in-process bus), the built-in WaitConditionHandle / WaitCondition.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from tests.support.convergence import Converge, converge
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


def template(*, count: int = 2, timeout: int = 60) -> dict[str, Any]:
    return {
        "heat_template_version": "2016-10-14",
        "resources": {
            "handle": {"type": "OS::Heat::WaitConditionHandle"},
            "wait": {
                "type": "OS::Heat::WaitCondition",
                "properties": {"handle": {"get_resource": "handle"}, "count": count, "timeout": timeout},
            },
            "after": {"type": "OS::Heat::Value", "properties": {"value": {"get_attr": ["wait", "data"]}}},
        },
        "outputs": {"data": {"value": {"get_attr": ["wait", "data"]}}},
    }


@pytest.fixture
async def cv(database_url: str) -> AsyncIterator[tuple[Converge, str]]:
    async with converge(database_url, seed=0, duplicate_rate=0.0) as harness, harness.http("t=p1") as base:
        yield harness, base


async def handle_endpoint(cv: Converge, stack_id: Any) -> tuple[str, str]:
    async def created() -> tuple[str, str] | None:
        row = await cv.pool.fetchrow(
            "SELECT attributes, action, status FROM resources WHERE stack_id = $1 AND name = 'handle'",
            stack_id,
        )
        if row is not None and (row["action"], row["status"]) == ("CREATE", "COMPLETE"):
            return row["attributes"]["endpoint"], row["attributes"]["token"]
        return None

    return await eventually(created, every=0.02)


async def post(url: str, token: str, body: Any) -> int:
    async with (
        aiohttp.ClientSession() as http,
        http.post(url, json=body, headers={"X-Auth-Token": token}) as r,
    ):
        return r.status


async def test_the_condition_completes_after_count_signals_with_their_data(cv: tuple[Converge, str]) -> None:
    harness, _ = cv
    stack = await harness.create("w", template(count=2))
    endpoint, token = await handle_endpoint(harness, stack)
    assert await post(endpoint, "not-the-token", {"data": "x"}) == 401
    assert await post(endpoint, token, {"status": "SUCCESS", "data": "first", "id": "a"}) == 200
    assert await post(endpoint, token, {"data": "second"}) == 200
    assert await harness.settled(stack) == ("CREATE", "COMPLETE", "Stack CREATE completed successfully")
    data = await harness.pool.fetchval(
        "SELECT attributes->>'data' FROM resources WHERE stack_id = $1 AND name = 'wait'", stack
    )
    assert json.loads(data) == {"a": "first", "2": "second"}
    events = [(e["resource_name"], e["action"], e["reason"]) for e in await harness.events(stack)]
    assert ("handle", "SIGNAL", "Signal 2 received") in events


async def test_a_failure_signal_fails_the_condition_and_the_stack(cv: tuple[Converge, str]) -> None:
    harness, _ = cv
    stack = await harness.create("w", template(count=1))
    endpoint, token = await handle_endpoint(harness, stack)
    assert await post(endpoint, token, {"status": "FAILURE", "reason": "setup script broke"}) == 200
    action, status, reason = await harness.settled(stack)
    assert (action, status) == ("CREATE", "FAILED")
    assert "setup script broke" in reason


async def test_signals_sent_before_the_condition_waits_still_count(cv: tuple[Converge, str]) -> None:
    harness, _ = cv
    slow = template(count=1)
    slow["resources"]["gate"] = {
        "type": "OS::Heat::TestResource",
        "properties": {"action_wait_secs": {"create": 1}},
    }
    slow["resources"]["wait"]["depends_on"] = ["gate"]
    stack = await harness.create("w", slow)
    endpoint, token = await handle_endpoint(harness, stack)
    assert await post(endpoint, token, {"data": "early"}) == 200
    assert (await harness.settled(stack))[1] == "COMPLETE"


async def test_a_condition_without_enough_signals_times_out(cv: tuple[Converge, str]) -> None:
    harness, _ = cv
    stack = await harness.create("w", template(count=1, timeout=1))
    action, status, reason = await harness.settled(stack)
    assert (action, status) == ("CREATE", "FAILED")
    assert "timed out" in reason


async def test_other_resources_refuse_signals(cv: tuple[Converge, str]) -> None:
    harness, base = cv
    stack = await harness.create(
        "v",
        {
            "heat_template_version": "2016-10-14",
            "resources": {"v": {"type": "OS::Heat::Value", "properties": {"value": 1}}},
        },
    )
    await harness.settled(stack)
    assert await post(f"{base}/v1/p1/stacks/v/{stack}/resources/v/signal", "t", {}) == 400
    assert await post(f"{base}/v1/p1/stacks/v/{stack}/resources/v/signal", "nobody", {}) == 401
    assert await post(f"{base}/v1/p1/stacks/nope/{stack}/resources/v/signal", "nobody", {}) == 401
