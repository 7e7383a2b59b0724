"""OS::Heat::AutoScalingGroup sized by its template: a child stack of `resource`
copies, resized by the difference with the survivors kept and the oldest removed
first, its attributes (current_size, refs, refs_map, outputs, outputs_list), a
rolling replacement of every member, and sizes outside min..max refused.

Real: PostgreSQL, the engine's convergence code (the group's job is an operation of
its child stack), the worker and the plugins; the bus is the in-process one.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from services.engine.core.model import StackId
from services.engine.goals import Goal
from services.engine.signals import Unauthorized
from shared.errors import ConflictError, InvalidInput
from tests.support.convergence import Converge, converge
from tests.support.openstack_cli import OpenStack
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

HOT = "2016-10-14"


def scaled(
    desired: int | None,
    *,
    min_size: int = 1,
    max_size: int = 5,
    value: str = "v1",
    cooldown: int | None = None,
) -> Goal:
    props: dict[str, Any] = {
        "min_size": min_size,
        "max_size": max_size,
        "resource": {"type": "Test::Thing", "properties": {"value": value}},
        "rolling_updates": {"max_batch_size": 1, "min_in_service": 1},
    }
    if desired is not None:
        props["desired_capacity"] = desired
    if cooldown is not None:
        props["cooldown"] = cooldown
    template = {
        "heat_template_version": HOT,
        "resources": {"asg": {"type": "OS::Heat::AutoScalingGroup", "properties": props}},
        "outputs": {
            "size": {"value": {"get_attr": ["asg", "current_size"]}},
            "refs": {"value": {"get_attr": ["asg", "refs"]}},
            "refs_map": {"value": {"get_attr": ["asg", "refs_map"]}},
            "values": {"value": {"get_attr": ["asg", "outputs_list", "value"]}},
            "by_name": {"value": {"get_attr": ["asg", "outputs", "value"]}},
        },
    }
    return Goal(template, {}, {}, {})


async def outputs(cv: Converge, stack_id: uuid.UUID) -> dict[str, Any]:
    view = await cv.engine.queries.stack(None, str(stack_id))
    assert view is not None
    _, resolved = await cv.engine.api().definition_and_outputs(view)
    return {k: v.value for k, v in resolved.items()}


async def settle(cv: Converge, stack_id: uuid.UUID, action: str) -> dict[str, Any]:
    assert (await cv.settled(StackId(stack_id)))[:2] == (action, "COMPLETE")
    return await outputs(cv, stack_id)


async def test_a_group_resizes_by_the_difference_keeping_survivors_and_removing_the_oldest(
    database_url: str,
) -> None:
    async with converge(database_url, seed=7) as cv:
        ops = cv.engine.operations
        top = await ops.create(project_id="p1", name="top", goal=scaled(2))
        out = await settle(cv, top, "CREATE")
        assert out["size"] == 2
        first = out["refs"]
        assert sorted(first) == sorted(cv.world.live)
        assert out["values"] == ["v1", "v1"]
        assert out["refs_map"] == {"0": first[0], "1": first[1]}
        assert out["by_name"] == {"0": "v1", "1": "v1"}

        await ops.update(top, scaled(4))
        out = await settle(cv, top, "UPDATE")
        assert out["size"] == 4
        assert out["refs"][:2] == first, "the survivors keep their ids, oldest first"
        assert cv.world.created == 4, "each member is created once"
        grown = out["refs"]

        await ops.update(top, scaled(3))
        out = await settle(cv, top, "UPDATE")
        assert out["refs"] == grown[1:], "the oldest member is removed first"
        assert sorted(cv.world.live) == sorted(grown[1:])
        assert sorted(out["refs_map"]) == ["1", "2", "3"]

        await ops.update(top, scaled(3, cooldown=30))  # desired_capacity unchanged: the size stays
        out = await settle(cv, top, "UPDATE")
        assert out["refs"] == grown[1:]

        await ops.update(top, scaled(3, value="v2"))  # every member updated, in rolling batches
        out = await settle(cv, top, "UPDATE")
        assert out["values"] == ["v2", "v2", "v2"]
        assert out["refs"] == grown[1:], "updated in place, same members"

        await ops.update(top, scaled(None, min_size=4, value="v2"))  # no desired: raised to min_size
        out = await settle(cv, top, "UPDATE")
        assert out["size"] == 4
        assert out["refs"][:3] == grown[1:]
        assert sorted(out["refs_map"]) == ["1", "2", "3", "4"], "a removed name is never used again"
        assert cv.world.created == 5

        await ops.delete(top)
        assert (await cv.settled(StackId(top)))[:2] == ("DELETE", "COMPLETE")
        assert cv.world.live == {}


async def test_sizes_outside_min_and_max_are_refused_naming_the_property(database_url: str) -> None:
    async with converge(database_url, seed=8) as cv:
        ops = cv.engine.operations
        with pytest.raises(InvalidInput, match="desired_capacity") as refused:
            await ops.create(project_id="p1", name="big", goal=scaled(6))
        assert "resources.asg.properties" in str(refused.value)
        with pytest.raises(InvalidInput, match="min_size"):
            await ops.create(project_id="p1", name="upside", goal=scaled(None, min_size=3, max_size=2))
        top = await ops.create(project_id="p1", name="ok", goal=scaled(2))
        out = await settle(cv, top, "CREATE")
        with pytest.raises(InvalidInput, match="desired_capacity"):
            await ops.update(top, scaled(0, min_size=1))
        assert (await outputs(cv, top))["refs"] == out["refs"], "a refused update changes nothing"
        assert len(cv.world.live) == 2


def with_policies(
    desired: int = 2,
    *,
    min_size: int = 1,
    max_size: int = 5,
    group_cooldown: int | None = None,
    **policies: dict[str, Any],
) -> Goal:
    """A `scaled` group with scaling policies (name -> properties, the group filled in)."""
    goal = scaled(desired, min_size=min_size, max_size=max_size, cooldown=group_cooldown)
    resources = dict(goal.template["resources"])
    for name, props in policies.items():
        resources[name] = {
            "type": "OS::Heat::ScalingPolicy",
            "properties": {"auto_scaling_group_id": {"get_resource": "asg"}, **props},
        }
    outputs_ = dict(goal.template["outputs"])
    outputs_.update({f"{n}_url": {"value": {"get_attr": [n, "signal_url"]}} for n in policies})
    return Goal({**goal.template, "resources": resources, "outputs": outputs_}, {}, {}, {})


UP = {"adjustment_type": "change_in_capacity", "scaling_adjustment": 2}
DOWN = {"adjustment_type": "change_in_capacity", "scaling_adjustment": -1}
EXACT = {"adjustment_type": "exact_capacity", "scaling_adjustment": 9}
EMPTY = {"adjustment_type": "exact_capacity", "scaling_adjustment": 0}
ONE = {"adjustment_type": "change_in_capacity", "scaling_adjustment": 1}


async def token(cv: Converge, top: uuid.UUID, name: str) -> str:
    (row,) = [r for r in await cv.rows(StackId(top)) if r["name"] == name]
    attributes = row["attributes"]
    attributes = json.loads(attributes) if isinstance(attributes, str) else attributes
    value: str = attributes["token"]
    return value


async def signal(
    cv: Converge,
    top: uuid.UUID,
    name: str,
    data: dict[str, Any] | None = None,
    *,
    conflicts: list[str] | None = None,
) -> None:
    """Signal policy `name` with its own token, as an alarm or a server would, retrying a
    409 as a client does (a group that a stack operation is working on refuses signals);
    each 409's message is added to `conflicts`."""
    own = await token(cv, top, name)
    async with asyncio.timeout(30):
        while True:
            try:
                await cv.engine.api().signals.signal(
                    StackId(top), name, data or {}, token=own, project_token_ok=False
                )
                return
            except ConflictError as exc:
                if conflicts is not None:
                    conflicts.append(str(exc))
                await asyncio.sleep(0.02)


async def scaled_to(cv: Converge, top: uuid.UUID, size: int, *, timeout: float = 60) -> dict[str, Any]:
    """The stack's outputs once its group has `size` members and its child stack is done."""

    async def scaled() -> dict[str, Any] | None:
        out = await outputs(cv, top)
        child = await cv.pool.fetchrow(
            "SELECT action, status FROM stacks WHERE owner_stack_id = $1 AND deleted_at IS NULL", top
        )
        settled = child is not None and child["status"] == "COMPLETE"
        if settled and out["size"] == size and len(out["refs"]) == size and len(cv.world.live) == size:
            return out
        return None

    return await eventually(scaled, timeout=timeout)


async def test_policy_signals_scale_a_group_two_four_three_keeping_survivors(database_url: str) -> None:
    async with converge(database_url, seed=9) as cv:
        ops = cv.engine.operations
        top = await ops.create(project_id="p1", name="top", goal=with_policies(up=UP, down=DOWN))
        first = (await settle(cv, top, "CREATE"))["refs"]
        assert (await outputs(cv, top))["up_url"].endswith(f"/stacks/top/{top}/resources/up/signal")

        await signal(cv, top, "up")
        out = await scaled_to(cv, top, 4)
        assert out["refs"][:2] == first, "the survivors keep their ids"
        grown = out["refs"]
        await signal(cv, top, "down")
        out = await scaled_to(cv, top, 3)
        assert out["refs"] == grown[1:], "the oldest member is removed first"
        assert cv.world.created == 4, "each member created once"

        with pytest.raises(Unauthorized):
            await cv.engine.api().signals.signal(
                StackId(top), "up", {}, token="0" * 48, project_token_ok=False
            )
        await signal(cv, top, "up", {"current": "ok"})  # an alarm back to ok: nothing to do
        await ops.update(top, with_policies(up=UP, down=DOWN))  # desired_capacity unchanged: the size stays
        out = await settle(cv, top, "UPDATE")
        assert out["refs"] == grown[1:]
        assert out["size"] == 3


async def test_a_signal_inside_the_cooldown_and_past_max_or_min_are_held_to_them(database_url: str) -> None:
    async with converge(database_url, seed=10) as cv:
        ops = cv.engine.operations
        cooling = {**ONE, "cooldown": 600}
        goal = with_policies(cooling=cooling, exact=EXACT, empty=EMPTY)
        top = await ops.create(project_id="p1", name="top", goal=goal)
        await settle(cv, top, "CREATE")
        await signal(cv, top, "cooling")
        await scaled_to(cv, top, 3)
        await signal(cv, top, "cooling")  # inside its cooldown: accepted, nothing changes
        events = [e for e in await cv.events(StackId(top)) if e["resource_name"] == "cooling"]
        assert "due to cooldown" in events[-1]["reason"]
        assert (await outputs(cv, top))["size"] == 3

        await signal(cv, top, "exact")  # 9, held to max_size 5
        await scaled_to(cv, top, 5)
        await signal(cv, top, "empty")  # 0, held to min_size 1
        await scaled_to(cv, top, 1)
        assert cv.world.created == 5

        # The group's own cooldown, kept through an update of the stack that touches the group.
        await ops.update(top, with_policies(cooling=cooling, exact=EXACT, empty=EMPTY, group_cooldown=600))
        assert (await settle(cv, top, "UPDATE"))["size"] == 1, "desired_capacity unchanged: the size stays"
        await signal(cv, top, "exact")
        await scaled_to(cv, top, 5)
        await ops.update(top, with_policies(cooling=cooling, exact=EXACT, empty=EMPTY, group_cooldown=601))
        assert (await settle(cv, top, "UPDATE"))["size"] == 5
        await signal(cv, top, "empty")
        events = [e for e in await cv.events(StackId(top)) if e["resource_name"] == "empty"]
        assert "asg could not perform scaling action: due to cooldown" in events[-1]["reason"]
        assert (await outputs(cv, top))["size"] == 5


async def test_a_failed_resize_fails_the_group_until_a_stack_update_repairs_it(database_url: str) -> None:
    async with converge(database_url, seed=13) as cv:
        ops = cv.engine.operations
        top = await ops.create(project_id="p1", name="top", goal=with_policies(up=UP))
        first = (await settle(cv, top, "CREATE"))["refs"]
        cv.world.refusing = "no capacity left"

        async def group() -> dict[str, Any]:
            (row,) = [
                r for r in await cv.rows(StackId(top)) if r["name"] == "asg" and r["replaced_by"] is None
            ]
            return dict(row)

        await signal(cv, top, "up")

        async def group_failed() -> bool:
            return bool((await group())["status"] == "FAILED")

        await eventually(group_failed, timeout=60)
        failed = await group()
        assert failed["action"] == "UPDATE"
        assert "no capacity left" in failed["status_reason"]
        kept = failed["attributes"]
        kept = json.loads(kept) if isinstance(kept, str) else kept
        assert kept["refs"] == first, "its attributes stay those of its last good size"
        events = [
            (e["action"], e["status"]) for e in await cv.events(StackId(top)) if e["resource_name"] == "asg"
        ]
        assert ("SCALE", "FAILED") in events

        await signal(cv, top, "up")  # accepted, nothing done: Heat's NoActionRequired
        notes = [e["reason"] for e in await cv.events(StackId(top)) if e["resource_name"] == "up"]
        assert "UPDATE_FAILED" in notes[-1]
        assert "a stack update repairs it" in notes[-1]

        cv.world.refusing = None
        await ops.update(top, with_policies(up=UP))
        out = await settle(cv, top, "UPDATE")
        assert out["size"] == 4, "the update brings the group to the size the signal decided"
        assert out["refs"][:2] == first
        assert ((await group())["action"], (await group())["status"]) == ("UPDATE", "COMPLETE")
        assert cv.world.created == 4


async def test_a_signal_waits_for_a_resize_ending_rather_than_deadlocking_with_it(database_url: str) -> None:
    """The end of a resize holds a member's row of the child, then takes the group's row;
    a signal meanwhile must not hold the group's row while it waits for the child's.
    The resize's end is played by a transaction of the test's own, on a real connection."""
    async with converge(database_url, seed=14) as cv:
        ops = cv.engine.operations
        top = await ops.create(project_id="p1", name="top", goal=with_policies(up=UP))
        await settle(cv, top, "CREATE")
        rows = {r["name"]: r for r in await cv.rows(StackId(top))}
        group_id, child = rows["asg"]["resource_id"], uuid.UUID(rows["asg"]["physical_id"])
        member = await cv.pool.fetchval("SELECT min(resource_id) FROM resources WHERE stack_id = $1", child)
        own = await token(cv, top, "up")
        async with cv.pool.acquire() as ending, ending.transaction():
            await ending.execute("SET LOCAL lock_timeout = '20s'")
            await ending.execute("SELECT 1 FROM resources WHERE resource_id = $1 FOR UPDATE", member)
            signalled = asyncio.create_task(
                cv.engine.api().signals.signal(StackId(top), "up", {}, token=own, project_token_ok=False)
            )

            async def signal_waits() -> bool:
                waiting = await cv.pool.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND datname = current_database()"
                )
                return bool(waiting)

            await eventually(signal_waits, timeout=20)
            # The resize's end takes the group's row: free, as the signal holds none of it yet.
            await ending.execute("UPDATE resources SET version = version WHERE resource_id = $1", group_id)
        await asyncio.wait_for(signalled, timeout=30)  # no ConflictError (a deadlock broken)
        await scaled_to(cv, top, 4)


async def test_ten_signals_at_once_without_cooldown_end_at_their_sum(database_url: str) -> None:
    async with converge(database_url, seed=11) as cv:
        ops = cv.engine.operations
        goal = with_policies(1, max_size=20, one=ONE)
        top = await ops.create(project_id="p1", name="top", goal=goal)
        first = (await settle(cv, top, "CREATE"))["refs"]
        conflicts: list[str] = []
        await asyncio.gather(*(signal(cv, top, "one", conflicts=conflicts) for _ in range(10)))
        assert conflicts == [], "signals racing the ends of resizes take turns, never deadlock"
        out = await scaled_to(cv, top, 11, timeout=120)
        assert out["refs"][0] == first[0]
        assert len(set(out["refs"])) == 11


async def test_scaling_through_heatclient_the_openstack_cli_and_the_policy_url(
    database_url: str, tmp_path: Path
) -> None:
    """Over real HTTP: heatclient creates the stack, `openstack stack resource signal`
    (a project token) scales up, a POST to the policy's URL with its own token scales
    down, and heatclient reads the group's new size and members."""
    import aiohttp
    from heatclient import client as heatclient

    async with converge(database_url, seed=12, duplicate_rate=0.0) as cv, cv.http("t1=p1") as base:
        hc = heatclient.Client("1", endpoint=f"{base}/v1/p1", token="t1")
        cli = OpenStack(f"{base}/v1/p1", "t1", tmp_path)
        template = with_policies(up=UP, down=DOWN).template
        created = await asyncio.to_thread(hc.stacks.create, stack_name="web", template=template)
        stack_id = str(created["stack"]["id"])
        top = uuid.UUID(stack_id)
        await settle(cv, top, "CREATE")

        await cli.ok("stack", "resource", "signal", stack_id, "up")
        await scaled_to(cv, top, 4)
        group = await asyncio.to_thread(hc.resources.get, stack_id, "asg")
        assert group.attributes["current_size"] == 4

        policy = await asyncio.to_thread(hc.resources.get, stack_id, "down")
        assert policy.attributes["alarm_url"].endswith(f"/stacks/web/{stack_id}/resources/down/signal")
        url = f"{base}/v1/p1/stacks/web/{stack_id}/resources/down/signal"
        async with aiohttp.ClientSession() as http:
            headers = {"X-Auth-Token": policy.attributes["token"]}
            async with http.post(url, json={"current": "alarm"}, headers=headers) as answer:
                assert answer.status == 200, await answer.text()
        out = await scaled_to(cv, top, 3)
        shown = await asyncio.to_thread(hc.stacks.get, stack_id)
        listed = {o["output_key"]: o["output_value"] for o in shown.outputs}
        assert listed["refs"] == out["refs"]
