"""Sandbox metrics and alarms (issue 20 item 5): an AutoScalingGroup scaled up by a sandbox
alarm on its servers' average load, with no monitoring service.

Real: the `converge` executable (`converge up`: PostgreSQL, the in-process bus and sandbox),
the stack created from `examples/autoscaling.yaml` (a group, a policy and a Sandbox::Alarm
wired to the policy's URL) through the Heat API over HTTP, the loads set through the
sandbox's HTTP API as a user with curl would, and the alarm POSTing the scaling policy's
signal URL with its token over HTTP.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.sandbox import SandboxClient, start_up
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "autoscaling.yaml"


@dataclass
class Up:
    http: aiohttp.ClientSession
    base: str
    token: str

    async def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        headers = {"X-Auth-Token": self.token}
        async with self.http.request(method, f"{self.base}/v1/demo{path}", json=body, headers=headers) as r:
            return r.status, await r.json() if r.content_type == "application/json" else None

    async def outputs(self, stack_id: str) -> dict[str, Any]:
        status, data = await self.call("GET", f"/stacks/web/{stack_id}")
        assert status == 200, data
        stack = data["stack"]
        return {"status": stack["stack_status"]} | {
            o["output_key"]: o.get("output_value") for o in stack.get("outputs") or []
        }


@pytest.fixture
async def up(tmp_path: Path, database_url: str) -> AsyncIterator[Up]:
    running = await start_up(tmp_path, database_url)
    try:
        async with aiohttp.ClientSession() as http:
            yield Up(http, running.base, running.token)
    finally:
        await running.process.stop()


async def test_the_examples_alarm_on_the_average_load_scales_the_group_up(up: Up) -> None:
    sandbox = SandboxClient(up.http, f"{up.base}/sandbox")
    status, made = await up.call("POST", "/stacks", {"stack_name": "web", "template": EXAMPLE.read_text()})
    assert status == 201, made
    stack_id = made["stack"]["id"]
    out: dict[str, Any] = {}

    async def settled(size: int) -> bool:
        out.update(await up.outputs(stack_id))
        return out["status"] in ("CREATE_COMPLETE", "UPDATE_COMPLETE") and out.get("size") == size

    await eventually(lambda: settled(2), timeout=90, every=0.2)
    first = list(out["servers"])
    alarm = await sandbox.ok("GET", f"/alarms/{out['alarm']}")
    assert alarm["matching_metadata"] == {"group": stack_id}
    assert alarm["alarm_actions"] == [{"url": out["scale_up_url"], "token": "***"}]

    async def alarm_is(state: str, servers: int) -> bool:
        seen = await sandbox.ok("GET", f"/alarms/{out['alarm']}")
        return bool(seen["state"] == state and seen["servers"] == servers)

    await eventually(lambda: alarm_is("ok", 2), timeout=30, every=0.2)  # no load given: 0
    for server in first:
        assert (await sandbox.ok("PUT", f"/servers/{server}/load", {"load": 90}))["load"] == 90
    # average 90 > 70: the alarm POSTs the policy's URL, the group grows by one; the new
    # server (no load, 0) brings the average to 60 and the alarm back to ok.
    await eventually(lambda: alarm_is("ok", 3), timeout=90, every=0.2)
    await eventually(lambda: settled(3), timeout=60, every=0.2)
    assert out["servers"][:2] == first, "the busy servers stay; one is added"
    seen = await sandbox.ok("GET", f"/alarms/{out['alarm']}")
    assert (seen["actions_sent"], seen["actions_failed"]) == (1, 0)
    status, events = await up.call("GET", f"/stacks/web/{stack_id}/resources/scale_up/events")
    assert status == 200, events
    assert any("size 2 -> 3" in e["resource_status_reason"] for e in events["events"])

    status, _ = await up.call("DELETE", f"/stacks/web/{stack_id}")
    assert status == 204

    async def alarm_gone() -> bool:
        code, _, _ = await sandbox.call("GET", f"/alarms/{out['alarm']}")
        return code == 404

    await eventually(alarm_gone, timeout=60, every=0.2)


async def test_bad_alarms_and_loads_are_refused_naming_the_field(up: Up) -> None:
    sandbox = SandboxClient(up.http, f"{up.base}/sandbox")
    signal = "/v1/p/stacks/s/1/resources/up/signal"
    elsewhere = {"threshold": 1, "alarm_actions": [{"url": f"http://203.0.113.9{signal}"}]}
    status, body, _ = await sandbox.call("POST", "/alarms", elsewhere)
    assert status == 400
    assert "alarm_actions.0.url" in body["error"]["message"]
    assert "CONVERGE_SANDBOX_ALARM_HOSTS" in body["error"]["message"]
    admin = {"threshold": 1, "alarm_actions": [{"url": "http://127.0.0.1:8005/admin/pause"}]}
    status, body, _ = await sandbox.call("POST", "/alarms", admin)
    assert status == 400
    assert "only POSTs to a resource's signal URL" in body["error"]["message"]
    status, body, _ = await sandbox.call("POST", "/alarms", {"threshold": "high"})
    assert status == 400
    assert "threshold" in body["error"]["message"]
    status, body, _ = await sandbox.call("PUT", "/servers/nope/load", {"load": 5})
    assert status == 404
    status, body, _ = await sandbox.call("PUT", "/servers/nope/load", {"load": 500})
    assert status == 400
    assert "load: a number from 0 to 100" in body["error"]["message"]
