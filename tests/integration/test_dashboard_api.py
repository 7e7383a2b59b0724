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


SOFTWARE_AND_GROUPS = {
    "heat_template_version": "2018-08-31",
    "resources": {
        "config": {
            "type": "OS::Heat::SoftwareConfig",
            "properties": {"group": "script", "config": "echo hi", "outputs": [{"name": "result"}]},
        },
        "deploy": {
            "type": "OS::Heat::SoftwareDeployment",
            "properties": {"config": {"get_resource": "config"}, "server": "server-1"},
        },
        "deploys": {
            "type": "OS::Heat::SoftwareDeploymentGroup",
            "properties": {
                "config": {"get_resource": "config"},
                "servers": {"a": "server-a", "b": "server-b"},
            },
        },
        "asg": {
            "type": "OS::Heat::AutoScalingGroup",
            "properties": {
                "min_size": 1,
                "max_size": 4,
                "desired_capacity": 2,
                "resource": {"type": "OS::Heat::None"},
            },
        },
        "grow": {
            "type": "OS::Heat::ScalingPolicy",
            "properties": {
                "auto_scaling_group_id": {"get_resource": "asg"},
                "adjustment_type": "change_in_capacity",
                "scaling_adjustment": 1,
            },
        },
        "pair": {
            "type": "OS::Heat::ResourceGroup",
            "properties": {"count": 2, "resource_def": {"type": "OS::Heat::None"}},
        },
        "plain": {"type": "Test::Thing", "properties": {"value": "p"}},
    },
}


async def test_a_resource_summary_shows_deployments_as_their_agents_left_them_and_group_sizes(
    api: tuple[Converge, str],
) -> None:
    cv, base = api
    stack_id = await cv.create("soft", SOFTWARE_AND_GROUPS)
    url = f"{base}/v1/p1/stacks/soft/{stack_id}/resources"

    async def summary(name: str) -> dict[str, Any]:
        found: dict[str, Any] = (await get(f"{url}/{name}/summary"))["summary"]
        return found

    async def deployments_waiting() -> dict[str, Any] | None:
        found = await summary("deploys")
        members = {d["name"]: d for d in found["deployments"]}
        single = (await summary("deploy"))["deployment"]
        ready = single["id"] and all(d["status"] == "IN_PROGRESS" for d in members.values())
        return {"single": single, "members": members} if ready and set(members) == {"a", "b"} else None

    # Before the agents answer: each deployment is written and waits for its server.
    waiting = await eventually(deployments_waiting, timeout=60)
    single = waiting["single"]
    assert (single["status"], single["action"], single["server_id"]) == ("IN_PROGRESS", "CREATE", "server-1")
    assert single["outputs"] == {}
    assert {d["server_id"] for d in waiting["members"].values()} == {"server-a", "server-b"}

    # Groups: sizes now, what they converge to, and their bounds; a plain resource adds nothing.
    async def created(name: str) -> dict[str, Any] | None:
        found = (await summary(name))["size"]
        return found if found["current_size"] == 2 else None

    sizes = await eventually(lambda: created("asg"), timeout=60)
    assert sizes == {
        "current_size": 2, "desired_size": 2, "min_size": 1, "max_size": 4,
        "desired_capacity": 2, "count": None,
    }  # fmt: skip
    await eventually(lambda: created("pair"), timeout=60)
    pair = await summary("pair")
    assert (pair["kind"], pair["size"]["current_size"], pair["size"]["count"]) == ("resource_group", 2, 2)
    assert await summary("plain") == {
        "kind": "resource", "deployment": None, "deployments": None, "more_members": 0, "size": None,
    }  # fmt: skip

    # A scaling signal: the group converges to 3 and then has 3 (before the deployments end:
    # a failed one fails the stack).
    status, body, _ = await call("POST", f"{url}/grow/signal", "t1", {})
    assert status == 200, body

    async def grown() -> dict[str, Any] | None:
        now = (await summary("asg"))["size"]
        return now if now["current_size"] == 3 else None

    grown_to = await eventually(grown, timeout=60)
    assert (grown_to["desired_size"], grown_to["min_size"], grown_to["max_size"]) == (3, 1, 4)

    # The agents answer as heat-config does: one succeeds with outputs, one member fails.
    outcome = {"deploy_stdout": "hi\n", "deploy_stderr": "", "deploy_status_code": 0, "result": "42"}
    status, body, _ = await call("POST", f"{url}/deploy/signal", "t1", outcome)
    assert status == 200, body
    ok_member, bad_member = waiting["members"]["a"], waiting["members"]["b"]
    status, body, _ = await call(
        "PUT",
        f"{base}/v1/p1/software_deployments/{ok_member['id']}",
        "t1",
        {"status": "COMPLETE", "output_values": {"deploy_stdout": "on a", "deploy_status_code": 0}},
    )
    assert status == 200, body
    failure = {"deploy_stdout": "", "deploy_stderr": "no such package: nginx", "deploy_status_code": 3}
    status, body, _ = await call(
        "PUT",
        f"{base}/v1/p1/software_deployments/{bad_member['id']}",
        "t1",
        {"status": "FAILED", "status_reason": "exit 3: no such package: nginx", "output_values": failure},
    )
    assert status == 200, body
    await cv.settled(stack_id, timeout=60)

    shown = (await summary("deploy"))["deployment"]
    assert (shown["status"], shown["name"], shown["id"]) == ("COMPLETE", "deploy", single["id"])
    assert shown["outputs"] == outcome, "stdout, stderr, the status code and the declared output"
    group = await summary("deploys")
    assert group["kind"] == "deployment_group"
    assert group["more_members"] == 0
    members = {d["name"]: d for d in group["deployments"]}
    assert (members["a"]["status"], members["a"]["outputs"]["deploy_stdout"]) == ("COMPLETE", "on a")
    assert members["b"]["status"] == "FAILED"
    assert members["b"]["status_reason"] == "exit 3: no such package: nginx"
    assert members["b"]["outputs"]["deploy_stderr"] == "no such package: nginx"

    status, body, _ = await call("GET", f"{url}/nosuch/summary", "t1")
    assert status == 404, body
