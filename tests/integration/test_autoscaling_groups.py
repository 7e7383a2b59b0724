"""OS::Heat::AutoScalingGroup sized by its template: a child stack of `resource`
copies, resized by the difference with the survivors kept and the oldest removed
first, its attributes (current_size, refs, refs_map, outputs, outputs_list), a
rolling replacement of every member, and sizes outside min..max refused.

Real: PostgreSQL, the engine's convergence code (the group's job is an operation of
its child stack), the worker and the plugins; the bus is the in-process one.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from services.engine.core.model import StackId
from services.engine.operations import Goal
from shared.errors import InvalidInput
from tests.support.convergence import Converge, converge

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
