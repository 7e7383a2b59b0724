"""Nested stacks through Heat's API: nested_depth on resources and events, `parent` on
the child, children listed only with show_nested.

Real: the engine's HTTP app over real HTTP, PostgreSQL, the engine, worker and observer
(in-process bus); the world is a `World` of Test::Thing resources.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from services.engine.goals import Goal
from tests.support.api import call
from tests.support.convergence import Converge, converge

pytestmark = pytest.mark.integration

INNER = """
heat_template_version: 2016-10-14
resources:
  a: {type: Test::Thing, properties: {value: a}}
  leaf: {type: leaf.yaml}
"""
LEAF = """
heat_template_version: 2016-10-14
resources:
  deep: {type: Test::Thing, properties: {value: deep}}
"""
TOP = {
    "heat_template_version": "2016-10-14",
    "resources": {
        "inner": {"type": "OS::Heat::Stack", "properties": {"template": INNER}},
        "plain": {"type": "Test::Thing", "properties": {"value": "p"}},
    },
}


@pytest.fixture
async def api(database_url: str) -> AsyncIterator[tuple[Converge, str, str]]:
    async with converge(database_url, seed=2) as cv, cv.http("t1=p1") as base:
        top = await cv.engine.operations.create(
            project_id="p1", name="top", goal=Goal(TOP, files={"leaf.yaml": LEAF})
        )
        assert (await cv.settled(top))[:2] == ("CREATE", "COMPLETE")
        yield cv, base, str(top)


async def get(url: str) -> Any:
    status, body, _ = await call("GET", url, "t1")
    assert status == 200, body
    return body


async def test_resources_of_nested_stacks_are_listed_to_the_depth_asked_for(
    api: tuple[Converge, str, str],
) -> None:
    _cv, base, top = api
    url = f"{base}/v1/p1/stacks/top/{top}/resources"
    shallow = (await get(url))["resources"]
    assert sorted(r["resource_name"] for r in shallow) == ["inner", "plain"]
    inner = next(r for r in shallow if r["resource_name"] == "inner")
    child_id = inner["physical_resource_id"]
    nested_link = next(link for link in inner["links"] if link["rel"] == "nested")
    assert nested_link["href"].endswith(f"/{child_id}")
    assert all("parent_resource" not in r for r in shallow)

    one = (await get(f"{url}?nested_depth=1"))["resources"]
    by_name = {r["resource_name"]: r for r in one}
    assert sorted(by_name) == ["a", "inner", "leaf", "plain"]
    assert by_name["a"]["parent_resource"] == "inner"
    assert by_name["leaf"]["parent_resource"] == "inner"
    stack_link = next(link for link in by_name["a"]["links"] if link["rel"] == "stack")
    assert stack_link["href"].endswith(f"/{child_id}"), "a nested resource links to its own stack"

    two = (await get(f"{url}?nested_depth=2"))["resources"]
    deep = next(r for r in two if r["resource_name"] == "deep")
    assert deep["parent_resource"] == "leaf"
    assert len(two) == 5


async def test_the_child_names_its_parent_and_is_listed_only_with_show_nested(
    api: tuple[Converge, str, str],
) -> None:
    _cv, base, top = api
    listed = (await get(f"{base}/v1/p1/stacks"))["stacks"]
    assert [s["stack_name"] for s in listed] == ["top"]
    assert listed[0]["parent"] is None
    everything = (await get(f"{base}/v1/p1/stacks?show_nested=true"))["stacks"]
    assert len(everything) == 3
    children = [s for s in everything if s["stack_name"] != "top"]
    inner = next(s for s in children if s["parent"] == top)
    assert inner["stack_name"].startswith("top-inner-")

    status, _, headers = await call("GET", f"{base}/v1/p1/stacks/{inner['id']}", "t1")
    assert status == 302
    shown = (await get(headers["Location"]))["stack"]
    assert shown["parent"] == top
    assert shown["stack_status"] == "CREATE_COMPLETE"


async def test_events_of_children_are_visible_from_the_parent(api: tuple[Converge, str, str]) -> None:
    _cv, base, top = api
    url = f"{base}/v1/p1/stacks/top/{top}/events"
    own = {e["resource_name"] for e in (await get(url))["events"]}
    assert own == {"top", "inner", "plain"}
    with_children = (await get(f"{url}?nested_depth=2"))["events"]
    names = {e["resource_name"] for e in with_children}
    assert {"a", "leaf", "deep"} <= names
    deep = next(e for e in with_children if e["resource_name"] == "deep")
    assert deep["root_stack_id"] == top
    assert deep["resource_status"] in ("CREATE_IN_PROGRESS", "CREATE_COMPLETE")
    stack_link = next(link for link in deep["links"] if link["rel"] == "stack")
    assert top not in stack_link["href"], "a child's event links to the child stack"
    status, body, _ = await call("GET", f"{url}?nested_depth=x", "t1")
    assert status == 400, body
