"""The API additions the dashboard uses: the template as sent, observation and drift in
the stack list, and the graph's drawing.

Real: the engine's HTTP API over real HTTP, PostgreSQL, the engine, worker and
observer (in-process bus); the world is a `World` of Test::Thing resources that a
test changes behind Converge's back. Waits are on conditions, with generous bounds.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support.api import call
from tests.support.convergence import Converge, converge
from tests.support.geometry import boxes_of, edges_through_boxes, unconnected_edges
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

TOKENS = "t1=p1"
SOURCE = """\
# The two-tier example, as a person writes it: comments, blank lines, their own order.
heat_template_version: 2016-10-14

parameters:
  size:
    type: number   # how big the database is
    default: 1

resources:
  db:
    type: Test::Thing
    properties: {value: d, size: {get_param: size}}

  # The app needs the database.
  app:
    type: Test::Thing
    properties:
      value: a
      ref: {get_resource: db}
"""
TWO_TIER = {
    "heat_template_version": "2016-10-14",
    "resources": {
        "db": {"type": "Test::Thing", "properties": {"value": "d", "size": 1}},
        "app": {"type": "Test::Thing", "properties": {"value": "a", "ref": {"get_resource": "db"}}},
    },
}
ALONE = {
    "heat_template_version": "2016-10-14",
    "resources": {"solo": {"type": "Test::Thing", "properties": {"value": "s"}}},
}


@pytest.fixture
async def api(database_url: str) -> AsyncIterator[tuple[Converge, str]]:
    async with converge(database_url, seed=0, duplicate_rate=0.0) as cv, cv.http(TOKENS) as base:
        yield cv, base


async def get(url: str) -> Any:
    status, body, _ = await call("GET", url, "t1")
    assert status == 200, body
    return body


async def test_the_template_is_kept_as_sent_beside_heats_parsed_template(api: tuple[Converge, str]) -> None:
    cv, base = api
    status, body, headers = await call(
        "POST", f"{base}/v1/p1/stacks", "t1", {"stack_name": "two", "template": SOURCE}
    )
    assert status == 201, body
    url = headers["Location"]
    stack_id = body["stack"]["id"]
    await cv.settled(stack_id)
    assert await get(f"{url}/template/source") == {"source": SOURCE, "as_sent": True}
    parsed = await get(f"{url}/template")
    assert parsed["resources"]["app"]["properties"]["ref"] == {"get_resource": "db"}, (
        "Heat's route is as before"
    )

    # An update that keeps the template (new parameters only) keeps its text too.
    status, body, _ = await call("PATCH", url, "t1", {"parameters": {"size": 2}})
    assert status == 202, body
    await cv.settled(stack_id)
    assert (await get(f"{url}/template/source"))["source"] == SOURCE

    # A template sent as an object (as Heat's clients send it) has no text: JSON, sections in order.
    status, body, _ = await call("PUT", url, "t1", {"template": parsed})
    assert status == 202, body
    await cv.settled(stack_id)
    shown = await get(f"{url}/template/source")
    assert shown["as_sent"] is False
    assert shown["source"].startswith('{\n  "heat_template_version": "2016-10-14",\n  "parameters"')


async def test_the_stack_list_shows_observation_and_drift(api: tuple[Converge, str]) -> None:
    cv, base = api
    watched = await cv.create("watched", TWO_TIER)
    quiet = await cv.create("quiet", ALONE)
    await cv.settled(watched)
    await cv.settled(quiet)
    status, body, _ = await call(
        "POST",
        f"{base}/v1/p1/stacks/watched/{watched}/actions",
        "t1",
        {"observe_start": {"interval": 1, "heal": False}},
    )
    assert status == 200, body
    (app,) = cv.world.by_name()["app"]
    app.properties["value"] = "tampered"

    async def listed() -> dict[str, Any] | None:
        stacks = (await get(f"{base}/v1/p1/stacks?with_observation=true"))["stacks"]
        found = {s["stack_name"]: s["observation"] for s in stacks}
        return found if found["watched"]["drifted"] else None

    found = await eventually(listed)
    assert found["watched"] == {"enabled": True, "interval": 1, "heal": False, "drifted": 1}
    assert found["quiet"] == {"enabled": False, "interval": None, "heal": False, "drifted": 0}
    plain = (await get(f"{base}/v1/p1/stacks"))["stacks"]
    assert all("observation" not in s for s in plain), "only when asked for"


async def test_the_graph_carries_its_drawing_with_no_edge_through_a_box(api: tuple[Converge, str]) -> None:
    cv, base = api
    chain = {f"r{i}": {"type": "OS::Heat::None", "depends_on": [f"r{i - 1}"] if i else []} for i in range(6)}
    chain["late"] = {"type": "OS::Heat::None", "depends_on": ["r0", "r5"]}  # spans every row
    stack_id = await cv.create("drawn", {"heat_template_version": "2016-10-14", "resources": chain})
    await cv.settled(stack_id)
    graph = (await get(f"{base}/v1/p1/stacks/drawn/{stack_id}/graph"))["graph"]
    drawing = graph["layout"]
    boxes = boxes_of(drawing["positions"], drawing["node_width"], drawing["node_height"])
    assert set(boxes) == {n["name"] for n in graph["nodes"]}
    wanted = [(e["from"], e["to"]) for e in graph["edges"]]
    assert ("r0", "late") in wanted
    assert edges_through_boxes(drawing["edges"], boxes) == []
    assert unconnected_edges(wanted, drawing["edges"], boxes) == []
