"""Heat parity (issue 20 item 4): OS::Heat::UpdateWaitConditionHandle, through
python-heatclient and signals POSTed over HTTP as a server would send them.

Real: a Converge engine with its HTTP API on PostgreSQL (tests.support.convergence), the
worker and the observer with the built-in handle and OS::Heat::WaitCondition. Proves that
every stack update — even one that changes nothing (PATCH) — replaces the handle with a
new id and token and clears its signals, so the condition waits for a fresh signal and
the old token no longer signals anything.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest

from tests.support import heat_parity
from tests.support.heat_parity import HeatClients
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

TEMPLATE = {
    "heat_template_version": "2016-10-14",
    "resources": {
        "handle": {"type": "OS::Heat::UpdateWaitConditionHandle"},
        "wait": {
            "type": "OS::Heat::WaitCondition",
            "properties": {"handle": {"get_resource": "handle"}, "timeout": 120},
        },
    },
    "outputs": {
        "data": {"value": {"get_attr": ["wait", "data"]}},
        "handle": {"value": {"get_resource": "handle"}},
    },
}


class Heat(HeatClients):
    async def waiting_handle(self, stack_id: str, *, before: str | None = None) -> tuple[str, str, str]:
        """(physical id, endpoint, token) of the handle (not `before`), once the condition
        (a new one: replaced with its handle) waits on it."""
        found: dict[str, Any] = {}

        async def waiting() -> bool:
            wait = await self.run(self.hc.resources.get, stack_id, "wait")
            if wait.resource_status != "CREATE_IN_PROGRESS":
                return False
            handle = await self.run(self.hc.resources.get, stack_id, "handle")
            found.update(handle.attributes, id=handle.physical_resource_id)
            return cast(bool, handle.resource_status.endswith("_COMPLETE") and found["id"] != before)

        await eventually(waiting, timeout=30)
        return found["id"], found["endpoint"], found["token"]

    async def post(self, url: str, token: str, body: Any) -> int:
        headers = {"X-Auth-Token": token, "Content-Type": "application/json"}
        async with aiohttp.ClientSession() as http, http.post(url, json=body, headers=headers) as r:
            return r.status


@pytest.fixture
async def heat(database_url: str, tmp_path: Path) -> AsyncIterator[Heat]:
    async with heat_parity.serving(Heat, database_url, tmp_path) as running:
        yield running


async def outputs(heat: Heat, stack_id: str, status: str) -> dict[str, Any]:
    stack = await heat.settled(stack_id)
    assert stack.stack_status == status, stack.stack_status_reason
    return {o["output_key"]: o["output_value"] for o in stack.outputs}


async def test_every_update_gives_a_new_handle_whose_signals_start_afresh(heat: Heat) -> None:
    made = await heat.run(heat.hc.stacks.create, stack_name="rollout", template=json.dumps(TEMPLATE))
    stack_id = made["stack"]["id"]
    first_id, endpoint, first_token = await heat.waiting_handle(stack_id)
    assert await heat.post(endpoint, first_token, {"data": "config v1 applied"}) == 200
    out = await outputs(heat, stack_id, "CREATE_COMPLETE")
    assert json.loads(out["data"]) == {"1": "config v1 applied"}
    assert out["handle"] == first_id

    preview = await heat.run(heat.hc.stacks.preview_update, stack_id, template=json.dumps(TEMPLATE))
    changes = {k: sorted(r["resource_name"] for r in v) for k, v in preview["resource_changes"].items()}
    assert changes["replaced"] == ["handle"], "a preview shows the handle replaced, though unchanged"
    await heat.run(heat.hc.stacks.update, stack_id, existing=True)  # nothing changed
    second_id, again, second_token = await heat.waiting_handle(stack_id, before=first_id)
    assert second_id != first_id, "the update replaced the handle"
    assert again == endpoint, "the handle's URL is by name; its token is what changed"
    assert second_token != first_token
    assert await heat.post(endpoint, first_token, {"data": "stale"}) == 401, "the old token is void"
    stack = await heat.run(heat.hc.stacks.get, stack_id)
    assert stack.stack_status == "UPDATE_IN_PROGRESS", "the condition waits for a fresh signal"
    assert await heat.post(endpoint, second_token, {"data": "config v2 applied"}) == 200
    out = await outputs(heat, stack_id, "UPDATE_COMPLETE")
    assert json.loads(out["data"]) == {"1": "config v2 applied"}, "the signals were cleared"
    assert out["handle"] == second_id


async def test_a_handle_takes_no_properties(heat: Heat) -> None:
    from heatclient import exc

    template = json.loads(json.dumps(TEMPLATE))
    template["resources"]["handle"]["properties"] = {"signal_transport": "TOKEN_SIGNAL"}
    with pytest.raises(exc.HTTPBadRequest) as refused:
        await heat.run(heat.hc.stacks.validate, template=json.dumps(template))
    assert "resources.handle.properties.signal_transport" in str(refused.value)
