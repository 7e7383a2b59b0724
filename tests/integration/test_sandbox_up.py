"""`converge up` runs the sandbox cloud too: the examples/web-tier stack is created,
updated (servers replaced, volumes re-attached and extended, a third server added) and
deleted through the API, and the sandbox's inventory matches the stack at every step;
the observer hears the sandbox's notifications on the in-process bus.
Real: the `converge` executable, PostgreSQL, the in-process bus, HTTP, SIGTERM."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.processes import ServiceProcess
from tests.support.sandbox import SandboxClient, start_up
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@dataclass
class Up:
    process: ServiceProcess
    http: aiohttp.ClientSession
    base: str
    token: str

    async def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        headers = {"X-Auth-Token": self.token}
        async with self.http.request(
            method, f"{self.base}/v1/demo{path}", json=body, headers=headers
        ) as response:
            data = await response.json() if response.content_type == "application/json" else None
            return response.status, data

    async def stack(self, stack_id: str) -> dict[str, Any]:
        status, data = await self.call("GET", f"/stacks/web/{stack_id}")
        assert status == 200, data
        return dict(data["stack"])

    async def settle(self, stack_id: str, expected: str) -> dict[str, Any]:
        """Wait until the stack leaves IN_PROGRESS; it must end `expected`."""
        seen: dict[str, Any] = {}

        async def settled() -> bool:
            seen.update(await self.stack(stack_id))
            return not str(seen["stack_status"]).endswith("IN_PROGRESS")

        await eventually(settled, timeout=90, every=0.2)
        assert seen["stack_status"] == expected, seen.get("stack_status_reason")
        return seen

    async def physical_ids(self, stack_id: str) -> dict[str, str]:
        status, data = await self.call("GET", f"/stacks/web/{stack_id}/resources")
        assert status == 200, data
        return {r["resource_name"]: r["physical_resource_id"] for r in data["resources"]}

    async def output(self, stack_id: str, key: str) -> Any:
        status, data = await self.call("GET", f"/stacks/web/{stack_id}/outputs/{key}")
        assert status == 200, data
        return data["output"]["output_value"]


@pytest.fixture
async def up(tmp_path: Path, database_url: str) -> AsyncIterator[Up]:
    running = await start_up(tmp_path, database_url)
    try:
        async with aiohttp.ClientSession() as http:
            yield Up(running.process, http, running.base, running.token)
    finally:
        await running.process.stop()


def template(name: str) -> str:
    """An example template as its YAML text (the API parses it, as Heat's does)."""
    return (EXAMPLES / name).read_text()


def by_kind(inventory: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in inventory if r["kind"] == kind}


async def test_the_web_tier_example_lives_in_the_in_process_sandbox(up: Up) -> None:
    sandbox = SandboxClient(up.http, f"{up.base}/sandbox")
    assert "Sandbox: " + up.base + "/sandbox/v1/inventory" in "\n".join(up.process.lines)

    status, created = await up.call(
        "POST", "/stacks", {"stack_name": "web", "template": template("web-tier.yaml")}
    )
    assert status == 201, created
    stack_id = created["stack"]["id"]
    await up.settle(stack_id, "CREATE_COMPLETE")
    ids = await up.physical_ids(stack_id)
    inventory = await sandbox.inventory()
    assert sorted(ids.values()) == sorted(r["id"] for r in inventory)
    assert all(r["status"] == "ACTIVE" for r in inventory)
    servers = by_kind(inventory, "server")
    addresses = [servers[ids[name]]["first_address"] for name in ("web1", "web2")]
    assert await up.output(stack_id, "server_addresses") == addresses
    assert await up.output(stack_id, "lb_members") == addresses
    assert by_kind(inventory, "volume")[ids["web1_data"]]["attached_to"] == ids["web1"]
    async with up.http.get(f"{up.base}/metrics") as response:
        metrics = await response.text()
    assert 'converge_sandbox_creates_total{kind="server"} 2.0' in metrics
    assert 'converge_observer_notifications_total{provider="sandbox"' in metrics, (
        "the observer hears the sandbox"
    )

    status, _ = await up.call("PUT", f"/stacks/web/{stack_id}", {"template": template("web-tier-v2.yaml")})
    assert status == 202
    await up.settle(stack_id, "UPDATE_COMPLETE")
    new_ids = await up.physical_ids(stack_id)
    inventory = await sandbox.inventory()
    assert sorted(new_ids.values()) == sorted(r["id"] for r in inventory), "replaced servers are gone"
    servers, volumes = by_kind(inventory, "server"), by_kind(inventory, "volume")
    assert len(servers) == 3
    assert {s["image"] for s in servers.values()} == {"ubuntu-24.04"}
    assert not {ids["web1"], ids["web2"]} & set(servers), "a new image replaces the servers"
    for n in ("1", "2"):
        kept = [f"web{n}_data", f"web{n}_attachment", "net", "subnet", "lb"]
        assert all(new_ids[name] == ids[name] for name in kept), "in-place changes keep the ids"
        assert volumes[new_ids[f"web{n}_data"]]["size"] == 20
        assert volumes[new_ids[f"web{n}_data"]]["attached_to"] == new_ids[f"web{n}"]
    assert by_kind(inventory, "network")[new_ids["net"]]["name"] == "web-network"
    addresses = [servers[new_ids[f"web{n}"]]["first_address"] for n in ("1", "2", "3")]
    assert await up.output(stack_id, "lb_members") == addresses

    status, _ = await up.call("DELETE", f"/stacks/web/{stack_id}")
    assert status == 204

    async def deleted() -> bool:
        status, data = await up.call("GET", f"/stacks/web/{stack_id}")
        return status == 404 or data["stack"]["stack_status"] == "DELETE_COMPLETE"

    await eventually(deleted, timeout=90, every=0.2)
    assert await sandbox.inventory() == []

    up.process.signal(signal.SIGTERM)
    assert await up.process.wait() == 0
