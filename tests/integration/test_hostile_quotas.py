"""Quotas hold under concurrency and count nested stacks; stack trees are bounded (M1, H3).

Real: a `converge up` process (tests.support.hostile.start_server) with a low
CONVERGE_MAX_STACKS_PER_PROJECT or CONVERGE_MAX_RESOURCES_PER_TREE, driven over real
HTTP; the fan-out test measures /healthz and the server's memory while the tree grows
(tests.support.hostile.probing).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.hostile import Api, Server, probing, start_server
from tests.support.tenancy import Tenant, hot, message, nested_stack, tenants, value

pytestmark = pytest.mark.integration

QUOTA = 3
TREE = 40


@pytest.fixture
async def quota_server(tmp_path: Path, database_url: str) -> AsyncIterator[tuple[Server, Api]]:
    env = {"CONVERGE_MAX_STACKS_PER_PROJECT": str(QUOTA)}
    async with start_server(tmp_path, database_url, env=env) as server, aiohttp.ClientSession() as http:
        yield server, Api(http, server.base)


@pytest.fixture
async def tree_server(tmp_path: Path, database_url: str) -> AsyncIterator[tuple[Server, Api]]:
    env = {"CONVERGE_MAX_RESOURCES_PER_TREE": str(TREE)}
    async with start_server(tmp_path, database_url, env=env) as server, aiohttp.ClientSession() as http:
        yield server, Api(http, server.base)


async def tree_rows(tenant: Tenant, name: str) -> list[dict[str, Any]]:
    """Every resource of the stack's tree (nested stacks included)."""
    response = await tenant.call("GET", f"{await tenant.url(name)}/resources?nested_depth=10")
    assert response.status == 200, response.body
    return list(response.body["resources"])


async def test_twenty_concurrent_creates_against_a_quota_of_three_create_exactly_three(
    quota_server: tuple[Server, Api],
) -> None:
    alpha, _, _ = tenants(quota_server[1])

    async def create(i: int) -> tuple[int, str]:
        body = {"stack_name": f"s{i}", "template": hot({"v": value(str(i))})}
        response = await alpha.call("POST", alpha.stacks, json=body)
        return response.status, message(response) if response.status != 201 else ""

    answers = await asyncio.gather(*(create(i) for i in range(20)))
    assert sorted(status for status, _ in answers) == [201] * QUOTA + [400] * (20 - QUOTA)
    refusals = {text for status, text in answers if status == 400}
    assert refusals == {"quota exceeded: at most 3 stacks per project (CONVERGE_MAX_STACKS_PER_PROJECT)"}
    assert len(await alpha.listed()) == QUOTA


async def test_nested_stacks_count_toward_the_project_quota(quota_server: tuple[Server, Api]) -> None:
    _, beta, _ = tenants(quota_server[1])
    children = {f"k{i}": nested_stack({"v": value(str(i))}) for i in range(3)}
    await beta.create("parent", hot(children))
    assert await beta.settled("parent") == "CREATE_FAILED"
    rows = (await beta.resources("parent")).values()
    failed = [r for r in rows if r["resource_status"] == "CREATE_FAILED"]
    assert len(failed) == 1, "the parent and two children fill the quota of three; the third is refused"
    (refused,) = failed
    assert (
        f"resource {refused['resource_name']} of stack parent cannot store its nested stack: quota exceeded: "
        "at most 3 stacks per project (CONVERGE_MAX_STACKS_PER_PROJECT)"
    ) in refused["resource_status_reason"]
    assert len(await beta.listed("?show_nested=true")) == QUOTA
    response = await beta.call("POST", beta.stacks, json={"stack_name": "more", "template": hot({})})
    assert response.status == 400, "a top-level stack is refused too: the nested ones count"
    assert "quota exceeded" in message(response)
    assert (await beta.call("DELETE", await beta.url("parent"))).status == 204
    assert await beta.settled("parent") == "MISSING"
    await beta.created("more", hot({"v": value("after")}))


async def test_a_template_resource_fanning_out_is_stopped_by_the_tree_limit(
    tree_server: tuple[Server, Api],
) -> None:
    """The review's reproduction (782 stacks in 17 s): a file holding five resources of its own type."""
    server, api = tree_server
    alpha, _, _ = tenants(api)
    fan = hot({f"c{i}": {"type": "fan.yaml"} for i in range(5)})
    body = {
        "stack_name": "fan5",
        "template": hot({"root": {"type": "fan.yaml"}}),
        "files": {"fan.yaml": json.dumps(fan)},
    }
    created = await alpha.call("POST", alpha.stacks, json=body)
    assert created.status == 201, created.body
    status, probe = await probing(server, alpha.settled("fan5"))
    probe.assert_healthy()
    assert status == "CREATE_FAILED"
    stacks = await alpha.listed("?show_nested=true")
    assert len(stacks) <= 1 + TREE // 5, f"{len(stacks)} stacks"
    rows = await tree_rows(alpha, "fan5")
    assert len(rows) <= TREE
    reasons = [r["resource_status_reason"] for r in rows]
    limit = f"more than the maximum of {TREE} per tree (CONVERGE_MAX_RESOURCES_PER_TREE)"
    assert any(
        "cannot store its nested stack: the stack tree would hold" in r and limit in r for r in reasons
    )
    assert (await alpha.call("DELETE", await alpha.url("fan5"))).status == 204
    assert await alpha.settled("fan5") == "MISSING"
    assert await alpha.listed("?show_nested=true") == []
    await alpha.created("normal", hot({"v": value("still works")}))


async def test_a_group_or_an_update_past_the_tree_limit_is_refused(tree_server: tuple[Server, Api]) -> None:
    _, beta, _ = tenants(tree_server[1])
    group = {
        "type": "OS::Heat::ResourceGroup",
        "properties": {"count": TREE, "resource_def": {"type": "OS::Heat::None"}},
    }
    await beta.create("grouped", hot({"g": group}))
    assert await beta.settled("grouped") == "CREATE_FAILED"
    reason = (await beta.resources("grouped"))["g"]["resource_status_reason"]
    assert (
        f"resource g of stack grouped cannot store its nested stack: the stack tree would hold {TREE + 1}"
        in reason
    )
    assert len(await beta.listed("?show_nested=true")) == 1, "the group's child was never made"

    big = {f"r{i}": {"type": "OS::Heat::None"} for i in range(TREE - 5)}
    await beta.created("tree", hot({"kid": nested_stack(big)}))
    url = await beta.url("tree")
    grown = hot({"kid": nested_stack(big), **{f"x{i}": {"type": "OS::Heat::None"} for i in range(5)}})
    response = await beta.call("PUT", url, json={"template": grown})
    assert response.status == 400
    assert message(response) == (
        f"resources: the stack tree would hold {TREE + 1} resources, more than the maximum of {TREE} "
        "per tree (CONVERGE_MAX_RESOURCES_PER_TREE)"
    )
    assert (await beta.snapshot("tree"))["status"] == "CREATE_COMPLETE", "refused before anything changed"
