"""Healing rebuilds whole chains in dependency order (newcomer review H2).

A network, its subnet and both servers of the examples' web tier (with the volume
attachments the cloud requires to go first) deleted out of band together are re-created
by ONE heal, dependencies first, and the dependents follow the new ids; the same drift
without healing is recovered by `converge stack check` then `converge stack update
--existing`; a chain broken while observed is healed from the provider's notifications
alone; a heal the cloud refuses is retried later and succeeds.

Real: a `converge up` process (PostgreSQL, its in-process bus and sandbox cloud) driven
over its HTTP API, the sandbox's own API for the out-of-band changes, and the `converge`
executable. Every wait is on a condition with a generous bound.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import BIN
from tests.support.up_api import EXAMPLES, Stack, UpApi, example, up_api
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

COLLECTIONS = {
    "net": "networks",
    "subnet": "subnets",
    "web1": "servers",
    "web2": "servers",
    "web1_attachment": "volume_attachments",
    "web2_attachment": "volume_attachments",
}
# What vanishes, in an order the cloud allows (what uses a resource goes first).
CHAIN = ["web1_attachment", "web2_attachment", "web1", "web2", "subnet", "net"]
# (dependency, dependent) pairs of the web tier among them.
DEPENDS = [
    ("net", "subnet"),
    ("subnet", "web1"),
    ("subnet", "web2"),
    ("web1", "web1_attachment"),
    ("web2", "web2_attachment"),
]


@pytest.fixture
async def up(tmp_path: Path, database_url: str) -> AsyncIterator[UpApi]:
    async with up_api(tmp_path, database_url) as client:
        yield client


async def web_tier(up: UpApi) -> tuple[Stack, dict[str, str]]:
    stack = await up.create("web", example("web-tier.yaml"))
    settled = await up.settle(stack)
    assert settled["stack_status"] == "CREATE_COMPLETE", settled["stack_status_reason"]
    return stack, await up.physical_ids(stack)


async def delete_out_of_band(up: UpApi, ids: dict[str, str]) -> None:
    for name in CHAIN:
        await up.sandbox.ok("DELETE", f"/{COLLECTIONS[name]}/{ids[name]}")


async def matches_the_cloud(up: UpApi, stack: Stack) -> dict[str, str] | None:
    """The stack's physical ids when every resource is live and ACTIVE in the sandbox and
    the sandbox holds nothing else; None otherwise."""
    ids = await up.physical_ids(stack)
    inventory = {r["id"]: r for r in await up.sandbox.inventory()}
    if set(ids.values()) != set(inventory) or any(r["status"] != "ACTIVE" for r in inventory.values()):
        return None
    return ids


async def outputs_follow(up: UpApi, stack: Stack, ids: dict[str, str]) -> None:
    """The load balancer and the outputs carry the servers' current addresses."""
    servers = [await up.sandbox.ok("GET", f"/servers/{ids[name]}") for name in ("web1", "web2")]
    addresses = [server["first_address"] for server in servers]
    members = await up.ok("GET", f"{stack.path}/outputs/lb_members")
    assert members["output"]["output_value"] == addresses
    for n in ("1", "2"):
        attachment = await up.sandbox.ok("GET", f"/volume_attachments/{ids[f'web{n}_attachment']}")
        assert (attachment["server"], attachment["volume"]) == (ids[f"web{n}"], ids[f"web{n}_data"])


@dataclass
class Healed:
    ids: dict[str, str]
    events: list[dict[str, Any]]

    def heals(self) -> list[dict[str, Any]]:
        return [e for e in self.events if str(e["resource_status_reason"]).startswith("Healing drift")]


async def healed(up: UpApi, stack: Stack, before: dict[str, str], changed: list[str]) -> Healed:
    """Wait until a heal has put the stack back: UPDATE_COMPLETE, no drift, every resource
    live in the cloud, and each of `changed` a new resource."""
    seen: dict[str, Any] = {}

    async def done() -> bool:
        seen["stack"] = await up.stack(stack)
        seen["drift"] = (await up.observation(stack))["drifted"]
        if seen["stack"]["stack_status"] != "UPDATE_COMPLETE" or seen["drift"]:
            return False
        ids = await matches_the_cloud(up, stack)
        seen["ids"] = ids
        return ids is not None and all(ids[name] != before[name] for name in changed)

    try:
        await eventually(done, timeout=120, every=0.2)
    except AssertionError:
        raise AssertionError(f"not healed: {seen}\n{up.running.process.output()}") from None
    return Healed(seen["ids"], await up.events(stack))


async def test_a_vanished_network_subnet_and_servers_are_rebuilt_in_dependency_order_by_one_heal(
    up: UpApi,
) -> None:
    stack, before = await web_tier(up)
    await delete_out_of_band(up, before)  # all gone before the first look: one round sees it all
    await up.act(stack, {"observe_start": {"interval": 1, "heal": True}})

    result = await healed(up, stack, before, CHAIN)
    assert all(result.ids[name] == before[name] for name in ("web1_data", "web2_data", "lb")), "kept"
    await outputs_follow(up, stack, result.ids)

    (heal,) = result.heals()  # one heal rebuilt the whole chain
    assert heal["resource_status"] == "UPDATE_IN_PROGRESS"
    assert all(name in heal["resource_status_reason"] for name in CHAIN), heal["resource_status_reason"]
    after = result.events[result.events.index(heal) :]
    seen = [(e["resource_name"], e["resource_status"]) for e in after]
    assert not [s for s in seen if s[1].endswith("FAILED")], seen
    for dependency, dependent in DEPENDS:
        built = seen.index((dependency, "CREATE_COMPLETE"))
        started = seen.index((dependent, "CREATE_IN_PROGRESS"))
        assert built < started, f"{dependent} was created before {dependency} was rebuilt: {seen}"


async def test_without_heal_a_check_then_an_update_of_the_existing_goal_rebuilds_the_chain(
    up: UpApi, tmp_path: Path
) -> None:
    stack, before = await web_tier(up)
    await delete_out_of_band(up, before)

    code, out, err = await converge(up, tmp_path, "stack", "check", "web", "--wait")
    assert code == 1, out + err
    assert "stack web CHECK_FAILED: Resource CHECK failed: net: the resource no longer exists" in err
    resources = await up.resources(stack)
    for name in CHAIN:  # every gone resource was found, not only the first
        assert resources[name]["resource_status"] == "CHECK_FAILED", resources[name]
        assert f"  {name} CHECK_FAILED: Resource CHECK failed: the resource no longer exists" in err
        assert not resources[name]["physical_resource_id"], "recorded missing"
    assert {resources[n]["resource_status"] for n in ("web1_data", "web2_data", "lb")} == {"CHECK_COMPLETE"}

    code, out, err = await converge(up, tmp_path, "stack", "update", "web", "--existing", "--wait")
    assert code == 0, out + err
    assert "UPDATE_COMPLETE" in out
    ids = await matches_the_cloud(up, stack)
    assert ids is not None, await up.sandbox.inventory()
    assert all(ids[name] != before[name] for name in CHAIN)
    await outputs_follow(up, stack, ids)


async def test_a_chain_broken_while_observed_is_healed_from_the_providers_notifications(up: UpApi) -> None:
    stack, before = await web_tier(up)
    # Rounds come only from notifications after the first (the interval is an hour).
    await up.act(stack, {"observe_start": {"interval": 3600, "heal": True}})

    async def first_round_seen() -> bool:
        return (await up.observation(stack))["last_cycle_at"] is not None

    await eventually(first_round_seen, timeout=30)
    broken = ["net", "subnet", "web1", "web2"]
    for name in broken:
        await up.sandbox.ok("POST", f"/{COLLECTIONS[name]}/{before[name]}/break", {"reason": "rack lost"})

    result = await healed(up, stack, before, broken)
    assert result.heals(), "a heal ran"
    assert all(result.ids[name] == before[name] for name in ("web1_data", "web2_data", "lb")), "kept"
    await outputs_follow(up, stack, result.ids)


async def test_a_heal_the_cloud_refuses_is_retried_later_and_succeeds(
    tmp_path: Path, database_url: str
) -> None:
    async with up_api(tmp_path, database_url, env={"CONVERGE_HEAL_RETRY_SECONDS": "0.5"}) as up:
        stack, before = await web_tier(up)
        # Out of band: web1's attachment goes, and its volume is attached to web2 instead,
        # so the cloud refuses to attach it to web1 again.
        await up.sandbox.ok("DELETE", f"/volume_attachments/{before['web1_attachment']}")
        stray = await up.sandbox.ok(
            "POST",
            "/volume_attachments",
            {"server": before["web2"], "volume": before["web1_data"], "mountpoint": "/dev/vdc"},
        )
        await up.act(stack, {"observe_start": {"interval": 1, "heal": True}})

        async def refused() -> bool:
            return any(
                e["resource_name"] == "web" and e["resource_status"] == "UPDATE_FAILED"
                for e in await up.events(stack)
            )

        await eventually(refused, timeout=60)
        failure = next(e for e in await up.events(stack) if e["resource_status"] == "UPDATE_FAILED")
        assert "is already attached to server" in failure["resource_status_reason"]
        drifted = [d["resource_name"] for d in (await up.observation(stack))["drifted"]]
        assert drifted == ["web1_attachment"], "the drift is still reported"

        await up.sandbox.ok("DELETE", f"/volume_attachments/{stray['id']}")  # the cloud allows it now
        result = await healed(up, stack, before, ["web1_attachment"])
        assert len(result.heals()) >= 2, "the heal was tried again"
        assert "(attempt " in result.heals()[-1]["resource_status_reason"]
        await outputs_follow(up, stack, result.ids)


async def converge(up: UpApi, data_dir: Path, *args: str) -> tuple[int, str, str]:
    """Run the `converge` executable against this `converge up` (its stored credentials)."""
    env = {**os.environ, "CONVERGE_URL": up.running.base, "CONVERGE_DATA_DIR": str(data_dir)}
    for name in ("CONVERGE_TOKEN", "CONVERGE_PROJECT"):
        env.pop(name, None)
    process = await asyncio.create_subprocess_exec(
        str(BIN / "converge"),
        *args,
        cwd=EXAMPLES,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(180):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()
