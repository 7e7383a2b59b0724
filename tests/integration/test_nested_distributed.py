"""A tree of nested stacks across separate processes: 2 engines, 2 workers, an observer.

Real: PostgreSQL, RabbitMQ, every service as its own OS process (an engine is
SIGKILLed in one test), and a REST API on 127.0.0.1 managed through
Converge::HTTP::Resource, whose items are the real world. The tree: a top stack
holding a ResourceGroup of template resources ("members"), each holding an
OS::Heat::Stack ("inner") of 5 resources. Operations start through the engine's
operations layer in-process; the engine processes do all the work, each child
stack handled by whichever engine takes its messages.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest

from services.engine.goals import Goal
from services.engine.operations import Operations
from tests.support.fake_rest_api import FakeApi, serve
from tests.support.service_cluster import Driver, ServiceCluster
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

LEAVES = 5


def _leaf(k: int) -> dict[str, Any]:
    name = {"list_join": ["", ["m", {"get_param": "index"}, f"-r{k}"]]}
    body: dict[str, Any] = {"_name": name, "parent": {"get_attr": ["r0", "id"]}}
    properties: dict[str, Any] = {"url": {"get_param": "url"}, "body": body}
    if k == 0:  # the root leaf: its value and fail knob; finished by the observer once ACTIVE
        properties["body"] = {"_name": name, "value": {"get_param": "value"}, "fail": {"get_param": "fail"}}
        properties["status_field"] = "status"
    return {"type": "Converge::HTTP::Resource", "properties": properties}


INNER = json.dumps(
    {
        "heat_template_version": "2016-10-14",
        "parameters": {
            "index": {"type": "string"},
            "url": {"type": "string"},
            "value": {"type": "string"},
            "fail": {"type": "boolean", "default": False},
        },
        "resources": {f"r{k}": _leaf(k) for k in range(LEAVES)},
        "outputs": {"r0_id": {"value": {"get_attr": ["r0", "id"]}}},
    }
)

MEMBER = """
heat_template_version: 2016-10-14
parameters:
  index: {type: string}
  url: {type: string}
  hot: {type: string, default: none}
  fail: {type: string, default: none}
conditions:
  is_hot: {equals: [{get_param: index}, {get_param: hot}]}
  is_failing: {equals: [{get_param: index}, {get_param: fail}]}
resources:
  inner:
    type: OS::Heat::Stack
    properties:
      template: {get_file: inner.yaml}
      parameters:
        index: {get_param: index}
        url: {get_param: url}
        value: {if: [is_hot, hot, cold]}
        fail: {if: [is_failing, true, false]}
outputs:
  first: {value: {get_attr: [inner, r0_id]}}
"""


def tree(api: FakeApi, *, count: int, hot: str = "none", fail: str = "none") -> Goal:
    properties = {"index": "%index%", "url": f"{api.base}/things", "hot": hot, "fail": fail}
    template = {
        "heat_template_version": "2016-10-14",
        "resources": {
            "group": {
                "type": "OS::Heat::ResourceGroup",
                "properties": {
                    "count": count,
                    "resource_def": {"type": "Tree::Member", "properties": properties},
                },
            }
        },
        "outputs": {"first": {"value": {"get_attr": ["group", "first"]}}},
    }
    return Goal(
        template,
        {"resource_registry": {"Tree::Member": "member.yaml"}},
        {},
        {"member.yaml": MEMBER, "inner.yaml": INNER},
    )


@dataclass
class Tree:
    driver: Driver
    api: FakeApi
    cluster: ServiceCluster

    @property
    def ops(self) -> Operations:
        return self.driver.operations

    @property
    def pool(self) -> asyncpg.Pool:
        return self.driver.pool

    async def settled(self, stack_id: uuid.UUID) -> tuple[str, str, str]:
        return await self.driver.settled(stack_id, timeout=180)

    async def eventually(
        self, probe: Callable[[dict[str, list[asyncpg.Record]]], bool], top: uuid.UUID
    ) -> None:
        """Wait (bounded) until `probe` holds for the live tree under `top`."""

        async def holds() -> bool:
            return probe(await self.stacks(top))

        await eventually(holds, timeout=120)

    async def stacks(self, top: uuid.UUID) -> dict[str, list[asyncpg.Record]]:
        """The live tree by level: "group" (the group's stack), "members", "inner"."""
        rows = await self.pool.fetch(
            """WITH RECURSIVE tree AS (
                   SELECT stack_id, 0 AS depth FROM stacks WHERE stack_id = $1
                   UNION ALL
                   SELECT s.stack_id, t.depth + 1 FROM stacks s JOIN tree t ON s.owner_stack_id = t.stack_id
               )
               SELECT s.*, r.name AS owner_name FROM tree t JOIN stacks s USING (stack_id)
               LEFT JOIN resources r ON r.resource_id = s.owner_resource_id
               WHERE s.deleted_at IS NULL AND t.depth > 0 ORDER BY t.depth""",
            top,
        )
        levels: dict[str, list[asyncpg.Record]] = {"group": [], "members": [], "inner": []}
        for row in rows:
            levels[["group", "members", "inner"][row["nested_depth"] - 1]].append(row)
        return levels

    async def operations(self) -> Counter[uuid.UUID]:
        """Operations started so far, per stack (from each stack's IN_PROGRESS stack events)."""
        rows = await self.pool.fetch(
            """SELECT e.stack_id, count(*) AS n FROM events e
               WHERE e.resource_type = 'OS::Heat::Stack' AND e.status = 'IN_PROGRESS'
                 AND e.resource_name = (SELECT name FROM stacks s WHERE s.stack_id = e.stack_id)
               GROUP BY e.stack_id"""
        )
        return Counter({r["stack_id"]: r["n"] for r in rows})

    async def member_index(self, top: uuid.UUID) -> dict[str, uuid.UUID]:
        """Member name ("0", "1", ...) -> its inner stack id."""
        levels = await self.stacks(top)
        member_of = {m["stack_id"]: m["owner_name"] for m in levels["members"]}
        return {member_of[i["owner_stack_id"]]: i["stack_id"] for i in levels["inner"]}

    def world(self) -> dict[str, dict[str, Any]]:
        return {item["_name"]: item for item in self.api.items.values()}


def leaves(members: range | list[int]) -> list[str]:
    return sorted(f"m{i}-r{k}" for i in members for k in range(LEAVES))


@pytest.fixture
async def running_tree(database_url: str, amqp_url: str, queue_prefix: str) -> AsyncIterator[Tree]:
    cluster = ServiceCluster(database_url=database_url, amqp_url=amqp_url, prefix=queue_prefix)
    async with serve(FakeApi()) as api:
        driver = await Driver.open(database_url, amqp_url, queue_prefix)
        try:
            await cluster.start_all()
            yield Tree(driver, api, cluster)
        finally:
            await cluster.stop()
            await driver.close()


@pytest.mark.timeout(600)
async def test_a_tree_of_stacks_creates_updates_scales_rolls_back_and_deletes_across_engines(
    running_tree: Tree,
) -> None:
    t = running_tree
    top = await t.ops.create(project_id="p", name="tree", goal=tree(t.api, count=10))
    assert await t.settled(top) == ("CREATE", "COMPLETE", "Stack CREATE completed successfully")
    levels = await t.stacks(top)
    assert [len(levels[k]) for k in ("group", "members", "inner")] == [1, 10, 10]
    assert sorted(t.world()) == leaves(range(10))
    assert all(t.world()[f"m{i}-r0"]["value"] == "cold" for i in range(10))
    assert len(t.api.created) == 10 * LEAVES

    # Both engines processed children of the group: each member stack was started by one of them.
    members = {str(m["stack_id"]) for m in levels["members"]}
    started_by = {
        name: {e["child"] for e in events if e.get("event") == "nested_operation"} & members
        for name, events in t.cluster.logs("engine").items()
    }
    assert started_by["engine-a"], started_by
    assert started_by["engine-b"], started_by
    assert started_by["engine-a"] | started_by["engine-b"] == members
    # ... and checked resources of the tree's child stacks (the 70 checks below the top are
    # shared out by the broker; the 10 of the member stacks alone are too few to be sure
    # each engine gets one).
    children = {str(s["stack_id"]) for level in levels.values() for s in level}
    checked_by = {
        name: {e.get("stack_id") for e in events if e.get("event") == "check"} & children
        for name, events in t.cluster.logs("engine").items()
    }
    assert checked_by["engine-a"], "both engines checked child stacks"
    assert checked_by["engine-b"], "both engines checked child stacks"

    # One leaf property: only the stacks on its path run an operation.
    inner_of = await t.member_index(top)
    before, puts = await t.operations(), sum(1 for s in t.api.seen if s.method == "PUT")
    await t.ops.update(top, tree(t.api, count=10, hot="3"))
    assert (await t.settled(top))[:2] == ("UPDATE", "COMPLETE")
    ran = (await t.operations()) - before
    assert {i for i, n in inner_of.items() if ran[n]} == {"3"}, "only member 3's inner stack ran"
    assert all(ran[m["stack_id"]] == 1 for m in levels["members"]), "each member's parameter changed"
    assert t.world()["m3-r0"]["value"] == "hot"
    assert sum(1 for s in t.api.seen if s.method == "PUT") - puts == 1, "one real resource changed"

    # Scale 10 -> 15 -> 7: only the difference is created or deleted.
    before = await t.operations()
    await t.ops.update(top, tree(t.api, count=15, hot="3"))
    assert (await t.settled(top))[:2] == ("UPDATE", "COMPLETE")
    assert sorted(t.world()) == leaves(range(15))
    assert len(t.api.created) == 15 * LEAVES
    ran = (await t.operations()) - before
    assert not any(ran[m["stack_id"]] for m in levels["members"]), "existing members were left alone"
    await t.ops.update(top, tree(t.api, count=7, hot="3"))
    assert (await t.settled(top))[:2] == ("UPDATE", "COMPLETE")
    assert sorted(t.world()) == leaves(range(7))
    assert len(t.api.created) == 15 * LEAVES, "scaling down created nothing"
    kept = await t.member_index(top)
    assert {i: kept[i] for i in kept} == {i: inner_of[i] for i in map(str, range(7))}

    # A child fails: the whole tree rolls back to the previous template.
    await t.ops.update(top, tree(t.api, count=7, hot="3", fail="2"))
    action, status, reason = await t.settled(top)
    assert (action, status) == ("ROLLBACK", "COMPLETE"), reason
    inner_events = await t.pool.fetch(
        "SELECT action, status FROM events WHERE stack_id = $1 AND resource_type = 'OS::Heat::Stack' "
        "AND resource_name = (SELECT name FROM stacks WHERE stack_id = $1) ORDER BY event_seq",
        kept["2"],
    )
    assert ("UPDATE", "FAILED") in [(e["action"], e["status"]) for e in inner_events]
    assert sorted(t.world()) == leaves(range(7))
    assert not any(item.get("fail") for item in t.world().values()), "the failed child was rolled back"
    assert t.world()["m3-r0"]["value"] == "hot"

    await t.ops.delete(top)
    assert (await t.settled(top))[:2] == ("DELETE", "COMPLETE")
    assert t.api.items == {}
    assert await t.pool.fetchval("SELECT count(*) FROM stacks WHERE deleted_at IS NULL") == 0


@pytest.mark.timeout(600)
async def test_killing_an_engine_while_children_are_in_progress_still_completes_the_tree(
    running_tree: Tree,
) -> None:
    t = running_tree
    t.api.create_status = "BUILD"  # leaves finish only when the test says so

    top = await t.ops.create(project_id="p", name="tree", goal=tree(t.api, count=10))
    await t.eventually(lambda levels: len(levels["inner"]) >= 5, top)  # children are in progress
    status = await t.pool.fetchval("SELECT status FROM stacks WHERE stack_id = $1", top)
    assert status == "IN_PROGRESS", "the leaves wait to become ACTIVE"
    await t.cluster.kill("engine-a")

    async def activate() -> None:
        while True:
            for item in t.api.items.values():
                item["status"] = "ACTIVE"
            await asyncio.sleep(0.1)

    activator = asyncio.create_task(activate())
    try:
        await t.cluster.start("engine-a")
        assert await t.settled(top) == ("CREATE", "COMPLETE", "Stack CREATE completed successfully")
    finally:
        activator.cancel()
    levels = await t.stacks(top)
    assert [len(levels[k]) for k in ("group", "members", "inner")] == [1, 10, 10]
    assert all((s["action"], s["status"]) == ("CREATE", "COMPLETE") for k in levels for s in levels[k])
    assert sorted(t.world()) == leaves(range(10))
    assert len(t.api.created) == 10 * LEAVES, "no real resource was created twice"
    killed = [p for name, p in t.cluster.retired if name == "engine-a"]
    assert any(e.get("event") == "check" for e in killed[0].events), "the killed engine was working"
