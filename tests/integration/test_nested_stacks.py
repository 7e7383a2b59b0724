"""Nested stacks in one process: OS::Heat::Stack, template resources and ResourceGroup,
their preemption, rollback, cancel, stack actions and depth limit.

Real: PostgreSQL, the engine's convergence code (a nested job is a message on the
engine queue, run as the child stack's own operation), the worker and observer and
the plugins; the bus is the in-process one, shuffling and duplicating deliveries.
The world is a `World` of Test::Thing resources, so each test sees what exists.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import pytest

from services.engine.core.model import Action, StackId
from services.engine.goals import Goal
from shared.errors import ConflictError, NotFound
from tests.support.convergence import Converge, converge
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

HOT = "2016-10-14"

PAIR = f"""
heat_template_version: {HOT}
parameters:
  value: {{type: string}}
resources:
  a: {{type: Test::Thing, properties: {{value: {{get_param: value}}}}}}
  b: {{type: Test::Thing, properties: {{value: b, ref: {{get_resource: a}}}}}}
outputs:
  a_id: {{value: {{get_resource: a}}}}
  a_value: {{value: {{get_attr: [a, value]}}}}
"""


def with_stack(value: str, *, after: bool = True) -> dict[str, Any]:
    """A stack whose `inner` OS::Heat::Stack holds a PAIR; `after` reads its outputs."""
    resources: dict[str, Any] = {
        "inner": {
            "type": "OS::Heat::Stack",
            "properties": {"template": PAIR, "parameters": {"value": value}},
        },
    }
    if after:
        resources["after"] = {
            "type": "Test::Thing",
            "properties": {
                "value": {"get_attr": ["inner", "a_value"]},
                "ref": {"get_attr": ["inner", "outputs", "a_id"]},
            },
        }
    return {
        "heat_template_version": HOT,
        "resources": resources,
        "outputs": {"listed": {"value": {"get_attr": ["inner", "outputs_list"]}}},
    }


async def children(cv: Converge, parent: uuid.UUID) -> list[asyncpg.Record]:
    return list(
        await cv.pool.fetch(
            "SELECT * FROM stacks WHERE owner_stack_id = $1 ORDER BY created_at, name", parent
        )
    )


async def traversals(cv: Converge, stack_id: uuid.UUID) -> int:
    count: int = await cv.pool.fetchval("SELECT count(*) FROM traversals WHERE stack_id = $1", stack_id)
    return count


def values(cv: Converge, name: str) -> list[Any]:
    return sorted(r.properties.get("value") for r in cv.world.by_name().get(name, []))


async def test_a_stack_resource_is_a_child_stack_whose_outputs_feed_its_dependents(database_url: str) -> None:
    async with converge(database_url, seed=3) as cv:
        top = await cv.create("top", with_stack("x"))
        assert await cv.settled(top) == ("CREATE", "COMPLETE", "Stack CREATE completed successfully")
        (child,) = await children(cv, top)
        inner = next(r for r in await cv.rows(top) if r["name"] == "inner")
        assert inner["physical_id"] == str(child["stack_id"])
        assert (child["owner_resource_id"], child["nested_depth"]) == (inner["resource_id"], 1)
        assert (child["action"], child["status"], child["owner_job_id"]) == ("CREATE", "COMPLETE", None)
        assert child["name"].startswith("top-inner-")
        (a,) = cv.world.by_name()["a"]
        assert values(cv, "a") == ["x"]
        (after,) = cv.world.by_name()["after"]
        assert after.properties == {"value": "x", "ref": a.physical_id}, "outputs reach dependents"
        assert inner["attributes"]["outputs"] == {"a_id": a.physical_id, "a_value": "x"}
        assert inner["attributes"]["stack_name"] == child["name"]

        await cv.update(top, with_stack("y"))
        assert (await cv.settled(top))[:2] == ("UPDATE", "COMPLETE")
        assert [c["stack_id"] for c in await children(cv, top)] == [child["stack_id"]], "updated in place"
        assert cv.world.by_name()["a"][0].physical_id == a.physical_id
        assert values(cv, "a") == ["y"]
        assert values(cv, "after") == ["y"]
        child_traversals = await traversals(cv, child["stack_id"])

        await cv.update(top, with_stack("y"))
        assert (await cv.settled(top))[:2] == ("UPDATE", "COMPLETE")
        assert await traversals(cv, child["stack_id"]) == child_traversals, "an unchanged child is left alone"

        await cv.delete(top)
        assert (await cv.settled(top))[:2] == ("DELETE", "COMPLETE")
        assert cv.world.live == {}
        (gone,) = await children(cv, top)
        assert (gone["action"], gone["status"]) == ("DELETE", "COMPLETE")
        assert gone["deleted_at"] is not None


MEMBER = f"""
heat_template_version: {HOT}
parameters:
  index: {{type: string}}
  label: {{type: string, default: plain}}
resources:
  thing:
    type: Test::Thing
    properties: {{value: {{list_join: ['-', [{{get_param: label}}, {{get_param: index}}]]}}}}
outputs:
  value: {{value: {{get_attr: [thing, value]}}}}
"""
ENV = {"resource_registry": {"My::Member": "member.yaml"}}


def member_stack(label: str, *, files: dict[str, str] | None = None) -> Goal:
    template = {
        "heat_template_version": HOT,
        "resources": {
            "one": {"type": "My::Member", "properties": {"index": "1", "label": label}},
            "direct": {"type": "member.yaml", "properties": {"index": "2"}},
            "user": {
                "type": "Test::Thing",
                "properties": {"value": {"get_attr": ["one", "value"]}, "ref": {"get_resource": "one"}},
            },
        },
    }
    return Goal(template, ENV, {}, files or {"member.yaml": MEMBER})


async def test_template_resources_take_properties_as_parameters_and_give_outputs_as_attributes(
    database_url: str,
) -> None:
    async with converge(database_url, seed=4) as cv:
        ops = cv.engine.operations
        top = await ops.create(project_id="p1", name="top", goal=member_stack("plain"))
        assert (await cv.settled(top))[:2] == ("CREATE", "COMPLETE")
        assert values(cv, "thing") == ["plain-1", "plain-2"]
        rows = {r["name"]: r for r in await cv.rows(top)}
        one_child = rows["one"]["physical_id"]
        assert rows["one"]["type"] == "member.yaml", "the registry maps My::Member to the file"
        assert values(cv, "user") == ["plain-1"]
        assert cv.world.by_name()["user"][0].properties["ref"] == one_child, "get_resource: the child's id"
        direct_traversals = await traversals(cv, uuid.UUID(rows["direct"]["physical_id"]))

        await ops.update(top, member_stack("hot"))
        assert (await cv.settled(top))[:2] == ("UPDATE", "COMPLETE")
        assert values(cv, "thing") == ["hot-1", "plain-2"]
        assert values(cv, "user") == ["hot-1"]
        assert await traversals(cv, uuid.UUID(rows["direct"]["physical_id"])) == direct_traversals, (
            "only the template resource whose properties changed ran an operation"
        )

        changed = MEMBER.replace("list_join: ['-'", "list_join: ['+'")
        await ops.update(top, member_stack("hot", files={"member.yaml": changed}))
        assert (await cv.settled(top))[:2] == ("UPDATE", "COMPLETE")
        assert values(cv, "thing") == ["hot+1", "plain+2"], "a changed template file updates its children"
        assert {r["name"]: r["physical_id"] for r in await cv.rows(top)}["one"] == one_child

        await ops.delete(top)
        assert (await cv.settled(top))[:2] == ("DELETE", "COMPLETE")
        assert cv.world.live == {}


def group(count: int, *, removal: list[str] | None = None, label: str = "plain") -> Goal:
    props: dict[str, Any] = {
        "count": count,
        "resource_def": {"type": "My::Member", "properties": {"index": "%index%", "label": label}},
    }
    if removal:
        props["removal_policies"] = [{"resource_list": removal}]
    template = {
        "heat_template_version": HOT,
        "resources": {"group": {"type": "OS::Heat::ResourceGroup", "properties": props}},
        "outputs": {
            "refs": {"value": {"get_attr": ["group", "refs"]}},
            "values": {"value": {"get_attr": ["group", "value"]}},
            "by_name": {"value": {"get_attr": ["group", "attributes", "value"]}},
            "first": {"value": {"get_attr": ["group", "resource.0.value"]}},
            "first_map": {"value": {"get_attr": ["group", "resource.0", "value"]}},
        },
    }
    return Goal(template, ENV, {}, {"member.yaml": MEMBER})


async def outputs(cv: Converge, stack_id: uuid.UUID) -> dict[str, Any]:
    view = await cv.engine.queries.stack(None, str(stack_id))
    assert view is not None
    _, resolved = await cv.engine.api().definition_and_outputs(view)
    return {k: v.value for k, v in resolved.items()}


async def members(cv: Converge, top: uuid.UUID) -> dict[str, str]:
    """Member name -> its child stack id, of the group's stack."""
    (group_stack,) = [c for c in await children(cv, top) if c["deleted_at"] is None]
    return {r["name"]: r["physical_id"] for r in await cv.rows(group_stack["stack_id"])}


async def test_a_group_scales_by_the_difference_and_never_reuses_removed_names(database_url: str) -> None:
    async with converge(database_url, seed=5) as cv:
        ops = cv.engine.operations
        top = await ops.create(project_id="p1", name="top", goal=group(3))
        assert (await cv.settled(top))[:2] == ("CREATE", "COMPLETE")
        assert values(cv, "thing") == ["plain-0", "plain-1", "plain-2"]
        before = await members(cv, top)
        things = {r.properties["value"]: r.physical_id for r in cv.world.live.values()}
        out = await outputs(cv, top)
        assert out["refs"] == [before["0"], before["1"], before["2"]]
        assert out["values"] == ["plain-0", "plain-1", "plain-2"]
        assert out["by_name"] == {"0": "plain-0", "1": "plain-1", "2": "plain-2"}
        assert out["first"] == out["first_map"] == "plain-0"

        await ops.update(top, group(5, removal=[before["1"]]))  # by reference, as `refs` gives it
        assert (await cv.settled(top))[:2] == ("UPDATE", "COMPLETE")
        grown = await members(cv, top)
        assert sorted(grown) == ["0", "2", "3", "4", "5"], "member 1 removed, its name skipped"
        assert (grown["0"], grown["2"]) == (before["0"], before["2"]), "kept members are the same stacks"
        assert values(cv, "thing") == ["plain-0", "plain-2", "plain-3", "plain-4", "plain-5"]
        kept = {r.properties["value"]: r.physical_id for r in cv.world.live.values()}
        assert (kept["plain-0"], kept["plain-2"]) == (things["plain-0"], things["plain-2"])
        assert cv.world.created == 6, "only the difference was created"

        await ops.update(top, group(2))  # the policy is gone; "1" stays removed
        assert (await cv.settled(top))[:2] == ("UPDATE", "COMPLETE")
        assert sorted(await members(cv, top)) == ["0", "2"]
        assert values(cv, "thing") == ["plain-0", "plain-2"]
        await ops.update(top, group(3, label="hot"))
        assert (await cv.settled(top))[:2] == ("UPDATE", "COMPLETE")
        assert values(cv, "thing") == ["hot-0", "hot-2", "hot-3"]
        assert (await outputs(cv, top))["values"] == ["hot-0", "hot-2", "hot-3"]

        await ops.delete(top)
        assert (await cv.settled(top))[:2] == ("DELETE", "COMPLETE")
        assert cv.world.live == {}


WAITING = f"""
heat_template_version: {HOT}
parameters:
  value: {{type: string}}
resources:
  handle: {{type: OS::Heat::WaitConditionHandle}}
  wait:
    type: OS::Heat::WaitCondition
    properties: {{handle: {{get_resource: handle}}, count: 1, timeout: 120}}
  thing: {{type: Test::Thing, properties: {{value: {{get_param: value}}}}}}
"""


def waiting(value: str) -> dict[str, Any]:
    return {
        "heat_template_version": HOT,
        "resources": {
            "inner": {
                "type": "OS::Heat::Stack",
                "properties": {"template": WAITING, "parameters": {"value": value}},
            }
        },
    }


async def child_waiting(cv: Converge, top: uuid.UUID) -> uuid.UUID:
    """The child stack, once its wait condition waits (its operation is in progress)."""

    async def waiting() -> asyncpg.Record | None:
        return await cv.pool.fetchrow(
            """SELECT s.stack_id FROM stacks s JOIN resources r ON r.stack_id = s.stack_id
               WHERE s.owner_stack_id = $1 AND r.name = 'wait' AND r.current_job IS NOT NULL
                 AND r.physical_id IS NOT NULL""",
            top,
        )

    row = await eventually(waiting, every=0.02)
    return uuid.UUID(str(row["stack_id"]))


async def signal(cv: Converge, stack_id: uuid.UUID, *, gone_ok: bool = False) -> None:
    """Signal the child's handle, as a client retries a 409 (a check changed the row).
    `gone_ok`: a rollback may already have deleted the condition and its handle."""
    async with asyncio.timeout(30):
        while True:
            try:
                await cv.engine.api().signals.signal(
                    StackId(stack_id), "handle", {"status": "SUCCESS"}, token="", project_token_ok=True
                )
                return
            except ConflictError:
                await asyncio.sleep(0.02)
            except NotFound:
                if not gone_ok:
                    raise
                return


async def stack_events(cv: Converge, stack_id: uuid.UUID) -> list[tuple[str, str]]:
    return [
        (e["action"], e["status"])
        for e in await cv.events(StackId(stack_id))
        if e["resource_type"] == "OS::Heat::Stack"
    ]


async def test_a_newer_parent_update_preempts_the_running_child_and_only_its_job_is_answered(
    database_url: str,
) -> None:
    async with converge(database_url, seed=6) as cv:
        top = await cv.create("top", waiting("one"))
        child = await child_waiting(cv, top)
        first_job = await cv.pool.fetchval("SELECT owner_job_id FROM stacks WHERE stack_id = $1", child)
        assert first_job is not None

        await cv.update(top, waiting("two"))  # the child's create is still waiting for its signal

        async def new_job() -> bool:
            owner = await cv.pool.fetchval("SELECT owner_job_id FROM stacks WHERE stack_id = $1", child)
            return owner not in (first_job, None)

        await eventually(new_job)
        assert await cv.state(child) == ("UPDATE", "IN_PROGRESS"), "the new job preempted the child's create"
        await signal(cv, child)
        assert (await cv.settled(top))[:2] == ("UPDATE", "COMPLETE")
        assert await cv.state(child) == ("UPDATE", "COMPLETE")
        assert values(cv, "thing") == ["two"]
        assert cv.world.created == 1, "the child's resource was not created twice"
        assert await stack_events(cv, child) == [
            ("CREATE", "IN_PROGRESS"),
            ("UPDATE", "IN_PROGRESS"),
            ("UPDATE", "COMPLETE"),
        ]
        answered = await cv.pool.fetchval(
            "SELECT count(*) FROM inbox WHERE message_id = $1", f"{first_job}:nested"
        )
        assert answered == 0, "the preempted job is never answered"


async def test_cancelling_the_parent_cancels_its_children_in_progress(database_url: str) -> None:
    async with converge(database_url, seed=7) as cv:
        top = await cv.create("top", waiting("one"))
        child = await child_waiting(cv, top)
        await cv.cancel(top, rollback=False)
        assert await cv.settled(top) == ("CREATE", "FAILED", "Stack CREATE cancelled")
        assert await cv.settled(StackId(child)) == ("CREATE", "FAILED", "Stack CREATE cancelled")

        async def answered() -> bool:  # the child's answer reaches the parent's resource
            return bool((await cv.rows(top))[0]["status"] == "FAILED")

        await eventually(answered)

        await signal(cv, child)  # the condition's job finishes; its outcome is recorded
        await cv.update(top, waiting("two"))  # converges the cancelled child
        assert (await cv.settled(top))[:2] == ("UPDATE", "COMPLETE")
        assert await cv.state(child) == ("UPDATE", "COMPLETE")
        assert values(cv, "thing") == ["two"]
        await cv.delete(top)
        assert (await cv.settled(top))[:2] == ("DELETE", "COMPLETE")
        assert cv.world.live == {}


async def test_cancel_with_rollback_converges_the_child_back(database_url: str) -> None:
    async with converge(database_url, seed=8) as cv:
        top = await cv.create("top", with_stack("x", after=False), rollback=True)
        assert (await cv.settled(top))[:2] == ("CREATE", "COMPLETE")
        await cv.update(top, waiting("new"))  # replaces the pair with a waiting child template
        child = await child_waiting(cv, top)
        await cv.cancel(top, rollback=True)
        await signal(cv, child, gone_ok=True)  # lets the child's in-flight condition finish, if any
        assert (await cv.settled(top))[:2] == ("ROLLBACK", "COMPLETE")
        assert values(cv, "a") == ["x"]
        assert values(cv, "b") == ["b"]
        assert "thing" not in cv.world.by_name(), "the rolled back child no longer holds the new resources"
        assert ("UPDATE", "FAILED") in await stack_events(cv, child), "the child was cancelled first"


FAILING = f"""
heat_template_version: {HOT}
parameters:
  value: {{type: string}}
  fail: {{type: boolean, default: false}}
resources:
  keep: {{type: Test::Thing, properties: {{value: kept}}}}
  thing: {{type: Test::Thing, properties: {{value: {{get_param: value}}, fail: {{get_param: fail}}}}}}
"""


def failing(value: str, fail: bool) -> Goal:
    template = {
        "heat_template_version": HOT,
        "resources": {"member": {"type": "failing.yaml", "properties": {"value": value, "fail": fail}}},
    }
    return Goal(template, {}, {}, {"failing.yaml": FAILING})


async def test_a_failed_child_is_rolled_back_with_its_parent(database_url: str) -> None:
    async with converge(database_url, seed=9) as cv:
        ops = cv.engine.operations
        top = await ops.create(project_id="p1", name="top", goal=failing("v1", False))
        assert (await cv.settled(top))[:2] == ("CREATE", "COMPLETE")
        (child,) = await children(cv, top)

        await ops.update(top, failing("v2", True))
        action, status, reason = await cv.settled(top)
        assert (action, status) == ("ROLLBACK", "COMPLETE"), reason
        assert values(cv, "thing") == ["v1"]
        assert values(cv, "keep") == ["kept"]
        assert await cv.state(child["stack_id"]) == ("UPDATE", "COMPLETE"), "the child converged back"
        assert await stack_events(cv, child["stack_id"]) == [
            ("CREATE", "IN_PROGRESS"),
            ("CREATE", "COMPLETE"),
            ("UPDATE", "IN_PROGRESS"),
            ("UPDATE", "FAILED"),
            ("UPDATE", "IN_PROGRESS"),
            ("UPDATE", "COMPLETE"),
        ]
        top_events = [e for e in await cv.events(top) if e["resource_name"] == "member"]
        assert any(e["status"] == "FAILED" and "told to fail" in e["reason"] for e in top_events), [
            e["reason"] for e in top_events
        ]
        assert cv.world.created == 2


async def test_check_suspend_and_resume_reach_the_children(database_url: str) -> None:
    async with converge(database_url, seed=10) as cv:
        ops = cv.engine.operations
        top = await ops.create(project_id="p1", name="top", goal=member_stack("plain"))
        assert (await cv.settled(top))[:2] == ("CREATE", "COMPLETE")
        kids = [c["stack_id"] for c in await children(cv, top)]
        assert len(kids) == 2

        await ops.stack_action(StackId(top), Action.SUSPEND)
        assert (await cv.settled(top))[:2] == ("SUSPEND", "COMPLETE")
        assert [await cv.state(k) for k in kids] == [("SUSPEND", "COMPLETE")] * 2
        assert cv.world.suspended == set(cv.world.live), "every resource of every child is suspended"
        await ops.stack_action(StackId(top), Action.RESUME)
        assert (await cv.settled(top))[:2] == ("RESUME", "COMPLETE")
        assert cv.world.suspended == set()

        await ops.stack_action(StackId(top), Action.CHECK)
        assert (await cv.settled(top))[:2] == ("CHECK", "COMPLETE")
        assert [await cv.state(k) for k in kids] == [("CHECK", "COMPLETE")] * 2
        (gone,) = [r for r in cv.world.live.values() if r.properties.get("value") == "plain-2"]
        del cv.world.live[gone.physical_id]
        await ops.stack_action(StackId(top), Action.CHECK)
        action, status, reason = await cv.settled(top)
        assert (action, status) == ("CHECK", "FAILED")
        assert "no longer exists" in reason

        await ops.update(top, member_stack("plain"))  # a failed check is healed by an update
        assert (await cv.settled(top))[:2] == ("UPDATE", "COMPLETE")
        assert values(cv, "thing") == ["plain-1", "plain-2"]


RECURSIVE = f"""
heat_template_version: {HOT}
resources:
  deeper: {{type: recursive.yaml}}
  here: {{type: Test::Thing, properties: {{value: level}}}}
"""


async def test_nesting_deeper_than_the_limit_fails_naming_the_resource(database_url: str) -> None:
    async with converge(database_url, seed=11) as cv:
        ops = cv.engine.operations
        goal = Goal(
            {"heat_template_version": HOT, "resources": {"start": {"type": "recursive.yaml"}}},
            files={"recursive.yaml": RECURSIVE},
        )
        top = await ops.create(project_id="p1", name="top", goal=goal, disable_rollback=True)
        action, status, reason = await cv.settled(top)
        assert (action, status) == ("CREATE", "FAILED")
        assert "resource deeper of stack top-start-" in reason, reason
        assert "depth 6, more than the maximum nested depth of 5" in reason, reason
        depths = await cv.pool.fetch("SELECT nested_depth FROM stacks ORDER BY nested_depth")
        assert [r["nested_depth"] for r in depths] == [0, 1, 2, 3, 4, 5]
        assert len(cv.world.live) == 5, "every level up to the limit was made"

        await ops.delete(top)
        assert (await cv.settled(top))[:2] == ("DELETE", "COMPLETE")
        assert cv.world.live == {}
        assert await cv.pool.fetchval("SELECT count(*) FROM stacks WHERE deleted_at IS NULL") == 0
