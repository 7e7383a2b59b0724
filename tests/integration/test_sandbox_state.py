"""A sandbox with a state file (CONVERGE_SANDBOX_STATE) killed at any moment restarts as
the same cloud: every change it answered is there, builds in progress end at the instant
they would have, a create replayed with a seen Idempotency-Key returns the same resource
(and creates nothing), addresses continue where they were, ids are never drawn twice.

Real: the `converge-sandbox` console script as a child process, its SQLite state file,
HTTP, SIGKILL and SIGTERM.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.sandbox import RunningSandbox, SandboxClient, start_sandbox
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


class Sandboxes:
    """`converge-sandbox` on one state file, started again after each stop."""

    def __init__(self, state: Path) -> None:
        self.env = {
            "CONVERGE_SANDBOX_STATE": str(state),
            "CONVERGE_SANDBOX_LATENCY": "600",  # builds end only when a test says so
            "CONVERGE_SANDBOX_SEED": "7",  # the same seed each time: ids must still not repeat
        }
        self.running: RunningSandbox | None = None

    async def start(self, http: aiohttp.ClientSession) -> SandboxClient:
        self.running = await start_sandbox(self.env)
        return SandboxClient(http, self.running.url)

    async def stop(self, sig: signal.Signals) -> int:
        assert self.running is not None
        self.running.process.signal(sig)
        return await self.running.process.wait()

    async def close(self) -> None:
        if self.running is not None:
            await self.running.process.stop()


@pytest.fixture
async def sandboxes(tmp_path: Path) -> AsyncIterator[Sandboxes]:
    running = Sandboxes(tmp_path / "state" / "sandbox.sqlite3")
    try:
        yield running
    finally:
        await running.close()


async def inventory(client: SandboxClient) -> tuple[dict[str, dict[str, Any]], int]:
    data = await client.ok("GET", "/inventory")
    return {r["id"]: r for r in data["resources"]}, int(data["created"])


async def test_a_killed_sandbox_restarts_as_the_same_cloud(
    sandboxes: Sandboxes, http: aiohttp.ClientSession
) -> None:
    cloud = await sandboxes.start(http)
    net = (await cloud.ok("POST", "/networks", {"name": "net"}))["id"]
    await cloud.ok("POST", "/subnets", {"network": net, "cidr": "10.0.0.0/24"})
    servers = [
        await cloud.ok(
            "POST", "/servers", {"image": "a", "networks": [net]}, headers={"Idempotency-Key": f"s{n}"}
        )
        for n in range(3)
    ]
    await cloud.ok("DELETE", f"/servers/{servers[1]['id']}")
    quick = await cloud.ok("POST", "/things", {"name": "quick", "build_seconds": 2})
    # Many answers at once (written together), the kill right after the last one.
    many = await asyncio.gather(*(cloud.ok("POST", "/things", {"name": f"t{n}"}) for n in range(30)))
    before, created = await inventory(cloud)
    assert await sandboxes.stop(signal.SIGKILL) == -signal.SIGKILL

    cloud = await sandboxes.start(http)
    after, created_after = await inventory(cloud)
    assert after.keys() == before.keys()
    assert {t["id"] for t in many} <= after.keys(), "every answered create survived the kill"
    assert created_after == created == 36
    for rid, resource in before.items():
        if rid != quick["id"]:
            assert after[rid] == resource

    # A build in progress ends at the instant it was due, not a restart later.
    async def built() -> bool:
        return await cloud.status("things", quick["id"]) == "ACTIVE"

    await eventually(built, timeout=30, every=0.1)
    finished = await cloud.ok("GET", f"/things/{quick['id']}")
    assert finished["updated_at"] == pytest.approx(quick["created_at"] + 2)

    # A create replayed with a key seen before the kill returns what it made then.
    status, replay, headers = await cloud.call(
        "POST", "/servers", {"image": "a", "networks": [net]}, headers={"Idempotency-Key": "s0"}
    )
    assert (status, replay["id"], headers.get("Idempotent-Replayed")) == (200, servers[0]["id"], "true")
    # The address the deleted server gave back is the next one handed out; ids are new.
    fresh = await cloud.ok("POST", "/servers", {"image": "a", "networks": [net]})
    assert fresh["first_address"] == servers[1]["first_address"]
    assert fresh["id"] not in before
    assert fresh["id"] != servers[1]["id"]
    assert (await inventory(cloud))[1] == 37, "the replay created nothing"


async def test_a_sandbox_stopped_with_sigterm_keeps_its_state_and_answers_from_it_at_once(
    sandboxes: Sandboxes, http: aiohttp.ClientSession
) -> None:
    cloud = await sandboxes.start(http)
    volume = await cloud.ok("POST", "/volumes", {"size": 1, "name": "data"})
    await cloud.ok("PATCH", f"/volumes/{volume['id']}", {"size": 5})
    assert await sandboxes.stop(signal.SIGTERM) == 0

    cloud = await sandboxes.start(http)
    kept = await cloud.ok("GET", f"/volumes/{volume['id']}")
    assert (kept["size"], kept["name"], kept["status"]) == (5, "data", "BUILD")
    status, body, _ = await cloud.call("DELETE", f"/volumes/{volume['id']}")
    assert status == 204, body
    assert await sandboxes.stop(signal.SIGKILL) == -signal.SIGKILL
    cloud = await sandboxes.start(http)
    assert await cloud.inventory() == []


async def test_a_servers_configuration_agent_survives_a_killed_sandbox(
    sandboxes: Sandboxes, http: aiohttp.ClientSession
) -> None:
    cloud = await sandboxes.start(http)
    server = (await cloud.ok("POST", "/servers", {"image": "a"}))["id"]
    agent = {"api": "http://127.0.0.1:9/v1/p", "token": "b" * 48}
    assert (await cloud.ok("PUT", f"/servers/{server}/agent", agent))["agent_token"] == "b" * 48
    assert await sandboxes.stop(signal.SIGKILL) == -signal.SIGKILL

    cloud = await sandboxes.start(http)
    shown = await cloud.ok("GET", f"/servers/{server}")
    assert shown["agent_token"] == "b" * 48, "the restarted sandbox's server still has its agent"
