"""The Heat v1 API: tenant isolation, authentication, Heat-shaped errors, and heatclient.

Real: the engine's HTTP app over real HTTP on 127.0.0.1, PostgreSQL, the
engine, worker and observer (in-process bus), python-heatclient unmodified.
"""

from __future__ import annotations

import asyncio
import io
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from services.engine.core.model import StackId
from services.engine.template import DEFAULT_LIMITS
from tests.support.api import call, wait_for
from tests.support.convergence import Converge, converge
from tests.support.engine_settings import engine_settings

pytestmark = pytest.mark.integration

TOKENS = "t1=p1,t2=p2,root=p3:admin"
TEMPLATE: dict[str, Any] = {
    "heat_template_version": "2016-10-14",
    "parameters": {
        "v": {"type": "string", "default": "x"},
        "secret": {"type": "string", "hidden": True, "default": "s3"},
    },
    "resources": {"test": {"type": "OS::Heat::TestResource", "properties": {"value": {"get_param": "v"}}}},
    "outputs": {"out": {"value": {"get_attr": ["test", "output"]}, "description": "the value"}},
}


@pytest.fixture
async def api(database_url: str) -> AsyncIterator[tuple[Converge, str]]:
    async with converge(database_url, seed=0, duplicate_rate=0.0) as cv, cv.http(TOKENS) as base:
        yield cv, base


async def create(base: str, name: str = "web") -> tuple[str, str]:
    status, body, headers = await call(
        "POST",
        f"{base}/v1/p1/stacks",
        "t1",
        {"stack_name": name, "template": TEMPLATE, "parameters": {"v": "hi"}},
    )
    assert status == 201, body
    return body["stack"]["id"], headers["Location"]


async def test_another_projects_stack_is_not_found_on_every_route(api: tuple[Converge, str]) -> None:
    cv, base = api
    stack_id, _ = await create(base)
    forms = [f"stacks/web/{stack_id}", "stacks/web", f"stacks/{stack_id}"]
    tails = [
        "",
        "/resources",
        "/resources/test",
        "/events",
        "/outputs",
        "/outputs/out",
        "/template",
        "/environment",
        "/files",
        "/resources/test/events",
        "/observation",
        "/graph",
        "/stream",
    ]
    changing = [
        ("POST", "/actions"),
        ("DELETE", "/abandon"),
        ("PUT", "/preview"),
        ("PATCH", "/resources/test"),
        ("POST", "/resources/test/signal"),
    ]
    calls = [*((m, "") for m in ("DELETE", "PUT", "PATCH")), *(("GET", t) for t in tails), *changing]
    for project in ("p1", "p2"):
        for form in forms:
            for method, tail in calls:
                url = f"{base}/v1/{project}/{form}{tail}"
                status, body, _ = await call(method, url, "t2", {"check": None})
                assert status == 404, (method, project, form, tail, status)
                assert body["error"]["type"] == "EntityNotFound"
    status, body, _ = await call("GET", f"{base}/v1/p2/stacks", "t2")
    assert body == {"stacks": []}
    assert (await cv.settled(stack_id))[1] == "COMPLETE", "the stack was untouched by project p2"  # type: ignore[arg-type]


async def test_no_token_or_a_bad_token_is_401_everywhere(api: tuple[Converge, str]) -> None:
    _, base = api
    for path in ("stacks", "stacks/x", "resource_types", "template_versions", "validate"):
        for token in (None, "wrong", ""):
            status, body, _ = await call("GET", f"{base}/v1/p1/{path}", token)
            assert status == 401, (path, token)
            assert body["code"] == 401
    status, _, _ = await call("GET", f"{base}/healthz", None)
    assert status == 200, "health needs no token"


async def test_admins_list_across_projects_with_global_tenant(api: tuple[Converge, str]) -> None:
    _, base = api
    stack_id, _ = await create(base)
    _, mine, _ = await call("GET", f"{base}/v1/p3/stacks", "root")
    assert mine == {"stacks": []}
    _, everyone, _ = await call("GET", f"{base}/v1/p3/stacks?global_tenant=true", "root")
    assert [s["id"] for s in everyone["stacks"]] == [stack_id]


async def test_errors_are_heat_shaped_and_name_every_problem(api: tuple[Converge, str]) -> None:
    _, base = api
    bad = {
        "heat_template_version": "2016-10-14",
        "resources": {
            "a": {"type": "No::Such"},
            "b": {"type": "OS::Heat::TestResource", "properties": {"nope": 1}},
        },
    }
    status, body, _ = await call("POST", f"{base}/v1/p1/stacks", "t1", {"stack_name": "bad", "template": bad})
    assert status == 400
    assert set(body) == {"explanation", "code", "title", "error"}
    assert "resources.a" in body["error"]["message"]
    assert "resources.b.properties" in body["error"]["message"]
    status, body, _ = await call(
        "POST", f"{base}/v1/p1/stacks", "t1", {"stack_name": "1bad", "template": TEMPLATE}
    )
    assert status == 400
    assert "stack_name" in body["error"]["message"]
    await create(base, "dup")
    status, body, _ = await call(
        "POST", f"{base}/v1/p1/stacks", "t1", {"stack_name": "dup", "template": TEMPLATE}
    )
    assert status == 409
    _, stacks, _ = await call("GET", f"{base}/v1/p1/stacks", "t1")
    assert [s["stack_name"] for s in stacks["stacks"]] == ["dup"], "a failed create changes nothing"


async def test_heatclient_drives_a_stack_through_its_life(api: tuple[Converge, str]) -> None:
    from heatclient import client as heat

    cv, base = api
    hc = heat.Client("1", endpoint=f"{base}/v1/p1", token="t1")

    def run() -> dict[str, Any]:
        created = hc.stacks.create(stack_name="hc", template=TEMPLATE, parameters={"v": "one"})
        stack_id = created["stack"]["id"]
        seen: dict[str, Any] = {"id": stack_id}
        wait_for(hc, stack_id, "CREATE_COMPLETE")
        seen["list"] = [s.stack_name for s in hc.stacks.list()]
        stack = hc.stacks.get(stack_id)
        seen["params"] = stack.parameters
        seen["output"] = hc.stacks.output_show(stack_id, "out")["output"]["output_value"]
        hc.stacks.update(stack_id, template=TEMPLATE, parameters={"v": "two"})
        wait_for(hc, stack_id, "UPDATE_COMPLETE")
        hc.stacks.update(stack_id, existing=True, parameters={"v": "three"})
        wait_for(hc, stack_id, "UPDATE_COMPLETE")
        seen["patched"] = hc.stacks.output_show(stack_id, "out")["output"]["output_value"]
        preview = hc.stacks.preview_update(
            stack_id,
            template={**TEMPLATE, "resources": {**TEMPLATE["resources"], "more": {"type": "OS::Heat::None"}}},
            parameters={"v": "four"},
        )
        seen["preview"] = {k: [r["resource_name"] for r in v] for k, v in preview["resource_changes"].items()}
        seen["preview_create"] = [
            r["resource_name"] for r in hc.stacks.preview(stack_name="p", template=TEMPLATE).resources
        ]
        seen["resources"] = [(r.resource_name, r.resource_status) for r in hc.resources.list(stack_id)]
        seen["attr"] = hc.resources.get(stack_id, "test").attributes["output"]
        seen["events"] = [e.resource_status for e in hc.events.list(stack_id)]
        seen["template"] = hc.stacks.template(stack_id)["resources"]["test"]["type"]
        hc.stacks.delete(stack_id)
        wait_for(hc, stack_id, "DELETE_COMPLETE")
        return seen

    seen = await asyncio.to_thread(run)
    assert seen["list"] == ["hc"]
    assert seen["params"]["v"] == "one"
    assert seen["params"]["secret"] == "******"
    assert seen["output"] == "one"
    assert seen["patched"] == "three"
    assert seen["preview"] == {
        "added": ["more"],
        "deleted": [],
        "replaced": [],
        "updated": ["test"],
        "unchanged": [],
    }
    assert seen["preview_create"] == ["test"]
    assert seen["resources"] == [("test", "UPDATE_COMPLETE")]
    assert seen["attr"] == "three"
    assert seen["events"][0] == "CREATE_IN_PROGRESS"
    assert seen["template"] == "OS::Heat::TestResource"
    assert cv.world.live == {}


def big_template(resources: int) -> dict[str, Any]:
    """A template of `resources` OS::Heat::None resources with long descriptions (~1.5 MiB as JSON)."""
    padding = "x" * 1500
    return {
        "heat_template_version": "2016-10-14",
        "resources": {
            f"r{i}": {"type": "OS::Heat::None", "metadata": {"padding": padding}} for i in range(resources)
        },
    }


@pytest.mark.parametrize(
    ("max_template_bytes", "expected"), [(DEFAULT_LIMITS.max_template_bytes, 400), (4 * 1024 * 1024, 201)]
)
async def test_the_api_checks_templates_against_the_deployments_limit_not_the_default(
    database_url: str, max_template_bytes: int, expected: int
) -> None:
    settings = engine_settings(max_template_bytes=max_template_bytes)
    template = big_template(1000)
    assert len(json.dumps(template)) > DEFAULT_LIMITS.max_template_bytes
    async with (
        converge(database_url, seed=0, duplicate_rate=0.0, settings=settings) as cv,
        cv.http(TOKENS) as base,
    ):
        payload = io.BytesIO(json.dumps({"stack_name": "big", "template": template}).encode())
        headers = {"X-Auth-Token": "t1", "Content-Type": "application/json"}
        async with (
            aiohttp.ClientSession() as http,
            http.post(f"{base}/v1/p1/stacks", data=payload, headers=headers) as response,
        ):
            status, body = response.status, await response.json()
        assert status == expected, body
        if expected == 400:
            assert "template" in body["error"]["message"].lower(), body
        else:
            stack_id = StackId(uuid.UUID(body["stack"]["id"]))
            assert (await cv.settled(stack_id, timeout=120))[:2] == ("CREATE", "COMPLETE")
