"""Heat parity (issue 19 item 5): `restricted_actions` in the environment, `immutable`
parameters and a ResourceGroup's `update_policy` (`batch_create`, `rolling_update`),
checked against what OpenStack Heat 27 gives (resource.py `_check_restricted_actions`,
parameters.py `immutable_params_modified`, resource_group.py batching).

Real: the engine's HTTP app over real HTTP, PostgreSQL, the engine, worker and observer
(in-process bus), python-heatclient unmodified and the real `openstack` CLI. The cloud is
a `World` of Test::Thing resources; group members are OS::Heat::TestResource, whose
actions take a while, so members in one batch are in progress together.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import yaml

from services.engine.core.model import StackId
from tests.support.heat_parity import HeatClients, serving

pytestmark = pytest.mark.integration


class Heat(HeatClients):
    async def create(self, name: str, template: dict[str, Any], **fields: Any) -> str:
        fields.setdefault("disable_rollback", True)
        created = await self.run(self.hc.stacks.create, stack_name=name, template=template, **fields)
        return str(created["stack"]["id"])

    async def settled(self, stack_id: str) -> Any:
        await self.cv.settled(StackId(uuid.UUID(stack_id)), timeout=90)
        return await self.run(self.hc.stacks.get, stack_id)

    async def reasons(self, stack_id: str, resource: str) -> list[tuple[str, str]]:
        events = await self.run(self.hc.events.list, stack_id, resource_name=resource)
        return [(e.resource_status, e.resource_status_reason) for e in events]


@pytest.fixture
async def heat(database_url: str, tmp_path: Path) -> AsyncIterator[Heat]:
    async with serving(Heat, database_url, tmp_path) as heat:
        yield heat


def things(**values: str) -> dict[str, Any]:
    return {
        "heat_template_version": "2016-10-14",
        "resources": {n: {"type": "Test::Thing", "properties": {"value": v}} for n, v in values.items()},
    }


# -- restricted_actions ----------------------------------------------------------------


async def test_a_restricted_update_fails_the_stack_update_and_leaves_the_resource_as_it_was(
    heat: Heat,
) -> None:
    """Heat: `ResourceActionRestricted: update is restricted for resource.`; the stack is
    UPDATE_FAILED, the resource keeps its state and the real resource is untouched; a
    resource not matched by the pattern is updated."""
    environment = {"resource_registry": {"resources": {"db*": {"restricted_actions": "update"}}}}
    stack_id = await heat.create("restricted", things(db1="v", web="w"), environment=environment)
    assert (await heat.settled(stack_id)).stack_status == "CREATE_COMPLETE"
    real = heat.cv.world.by_name()["db1"][0]

    await heat.run(
        heat.hc.stacks.update, stack_id, template=things(db1="changed", web="w2"), environment=environment
    )
    stack = await heat.settled(stack_id)
    assert stack.stack_status == "UPDATE_FAILED"
    assert stack.stack_status_reason == (
        "Resource UPDATE failed: ResourceActionRestricted: resources.db1: update is restricted for resource."
    )
    assert ("UPDATE_FAILED", "update is restricted for resource.") in await heat.reasons(stack_id, "db1")
    assert heat.cv.world.by_name()["db1"] == [real]
    assert real.properties["value"] == "v"
    shown = await heat.run(heat.hc.resources.get, stack_id, "db1")
    assert shown.resource_status == "CREATE_COMPLETE"
    listed = await heat.cli.json("stack", "show", "restricted")
    assert listed["stack_status_reason"] == stack.stack_status_reason

    # The same template again changes nothing of db1, so the update completes.
    await heat.run(
        heat.hc.stacks.update, stack_id, template=things(db1="v", web="w2"), environment=environment
    )
    assert (await heat.settled(stack_id)).stack_status == "UPDATE_COMPLETE"
    assert sorted(r.properties["value"] for r in heat.cv.world.live.values()) == ["v", "w2"]


async def test_replace_restricted_refuses_a_replacement_but_allows_an_update_in_place(heat: Heat) -> None:
    environment = {"resource_registry": {"resources": {"db": {"restricted_actions": ["replace"]}}}}
    stack_id = await heat.create("noreplace", things(db="v"), environment=environment)
    await heat.settled(stack_id)

    await heat.run(heat.hc.stacks.update, stack_id, template=things(db="v2"), environment=environment)
    assert (await heat.settled(stack_id)).stack_status == "UPDATE_COMPLETE"
    assert [r.properties["value"] for r in heat.cv.world.by_name()["db"]] == ["v2"]

    replacing = things(db="v2")
    replacing["resources"]["db"]["properties"]["size"] = 2  # Test::Thing replaces on size
    await heat.run(heat.hc.stacks.update, stack_id, template=replacing, environment=environment)
    stack = await heat.settled(stack_id)
    assert (stack.stack_status, stack.stack_status_reason) == (
        "UPDATE_FAILED",
        "Resource UPDATE failed: ResourceActionRestricted: resources.db: replace is restricted for resource.",
    )
    assert len(heat.cv.world.by_name()["db"]) == 1, "nothing was created to replace it"


async def test_an_invalid_restricted_action_is_refused_naming_where(heat: Heat) -> None:
    from heatclient import exc

    environment = {"resource_registry": {"resources": {"db": {"restricted_actions": ["delete"]}}}}
    with pytest.raises(exc.HTTPBadRequest) as refused:
        await heat.create("badrestrict", things(db="v"), environment=environment)
    assert "environment.resource_registry.resources.db.restricted_actions" in str(refused.value)
    assert "invalid restricted action 'delete'; valid restricted actions are: update, replace" in str(
        refused.value
    )


# -- immutable parameters ---------------------------------------------------------------


IMMUTABLE: dict[str, Any] = {
    "heat_template_version": "2016-10-14",
    "parameters": {
        "zone": {"type": "string", "default": "a", "immutable": True},
        "size": {"type": "string", "default": "s"},
    },
    "resources": {
        "thing": {
            "type": "Test::Thing",
            "properties": {"value": {"list_join": ["-", [{"get_param": "zone"}, {"get_param": "size"}]]}},
        }
    },
}


async def test_an_immutable_parameter_change_is_refused_with_heats_error_and_changes_nothing(
    heat: Heat,
) -> None:
    """Heat's ImmutableParameterModified (400): through PUT, PATCH (the CLI's --existing)
    and an update preview; the stack is left as it was. Other parameters still change."""
    from heatclient import exc

    stack_id = await heat.create("immutable", IMMUTABLE, parameters={"zone": "a"})
    await heat.settled(stack_id)
    message = "The following parameters are immutable and may not be updated: zone"

    with pytest.raises(exc.HTTPBadRequest) as refused:
        await heat.run(heat.hc.stacks.update, stack_id, template=IMMUTABLE, parameters={"zone": "b"})
    assert message in str(refused.value)
    with pytest.raises(exc.HTTPBadRequest) as refused:
        await heat.run(heat.hc.stacks.update, stack_id, existing=True, parameters={"zone": "b"})
    assert message in str(refused.value)
    with pytest.raises(exc.HTTPBadRequest) as refused:
        await heat.run(heat.hc.stacks.preview_update, stack_id, template=IMMUTABLE, parameters={"zone": "b"})
    assert message in str(refused.value)
    failed = await heat.cli.run("stack", "update", "immutable", "--existing", "--parameter", "zone=c")
    assert failed.code != 0
    assert message in failed.err
    # A new default that changes the value is a change too (the value is not given).
    zone = {**IMMUTABLE["parameters"]["zone"], "default": "z"}
    moved = {**IMMUTABLE, "parameters": {**IMMUTABLE["parameters"], "zone": zone}}
    with pytest.raises(exc.HTTPBadRequest) as refused:
        await heat.run(heat.hc.stacks.update, stack_id, template=moved)
    assert message in str(refused.value)

    stack = await heat.run(heat.hc.stacks.get, stack_id)
    assert (stack.stack_status, stack.parameters["zone"]) == ("CREATE_COMPLETE", "a")
    assert [r.properties["value"] for r in heat.cv.world.live.values()] == ["a-s"]

    await heat.run(heat.hc.stacks.update, stack_id, existing=True, parameters={"size": "m"})
    assert (await heat.settled(stack_id)).stack_status == "UPDATE_COMPLETE"
    assert [r.properties["value"] for r in heat.cv.world.live.values()] == ["a-m"]


async def test_an_immutable_parameter_of_a_nested_stack_fails_the_update_of_its_resource(heat: Heat) -> None:
    """Heat updates a template resource's child through its update call, which refuses
    the change: the resource and the stack update fail saying so, the child is unchanged."""
    files = {"child.yaml": yaml.safe_dump(IMMUTABLE)}
    template: dict[str, Any] = {
        "heat_template_version": "2016-10-14",
        "resources": {"inner": {"type": "child.yaml", "properties": {"zone": "a"}}},
    }
    stack_id = await heat.create("nested-immutable", template, files=files)
    assert (await heat.settled(stack_id)).stack_status == "CREATE_COMPLETE"

    template["resources"]["inner"]["properties"] = {"zone": "b", "size": "m"}
    await heat.run(heat.hc.stacks.update, stack_id, template=template, files=files)
    stack = await heat.settled(stack_id)
    assert stack.stack_status == "UPDATE_FAILED"
    assert "The following parameters are immutable and may not be updated: zone" in stack.stack_status_reason
    assert [r.properties["value"] for r in heat.cv.world.live.values()] == ["a-s"]

    template["resources"]["inner"]["properties"] = {"zone": "a", "size": "m"}
    await heat.run(heat.hc.stacks.update, stack_id, template=template, files=files)
    assert (await heat.settled(stack_id)).stack_status == "UPDATE_COMPLETE"
    assert [r.properties["value"] for r in heat.cv.world.live.values()] == ["a-m"]


# -- ResourceGroup update_policy ------------------------------------------------------------


def group(count: int, value: str, update_policy: dict[str, Any]) -> dict[str, Any]:
    member = {
        "type": "OS::Heat::TestResource",
        "properties": {"value": value, "action_wait_secs": {"create": 0.3, "update": 0.3}},
    }
    return {
        "heat_template_version": "2016-10-14",
        "resources": {
            "group": {
                "type": "OS::Heat::ResourceGroup",
                "update_policy": update_policy,
                "properties": {"count": count, "resource_def": member},
            }
        },
    }


def spans(events: Sequence[asyncpg.Record], action: str) -> list[tuple[str, int, int, float, float]]:
    """(member, first seq, last seq, start, end) of each member's `action`, from its
    IN_PROGRESS event to its COMPLETE event, in the child's event order."""
    start: dict[str, asyncpg.Record] = {}
    out = []
    for e in events:
        if e["action"] != action or not e["resource_name"].isdigit():
            continue
        if e["status"] == "IN_PROGRESS":
            start[e["resource_name"]] = e
        elif e["status"] == "COMPLETE" and e["resource_name"] in start:
            s = start.pop(e["resource_name"])
            out.append(
                (
                    e["resource_name"],
                    s["event_seq"],
                    e["event_seq"],
                    s["created_at"].timestamp(),
                    e["created_at"].timestamp(),
                )
            )
    return out


def most_at_once(found: list[tuple[str, int, int, float, float]]) -> int:
    """The most members whose action was in progress at once (by event order)."""
    marks = sorted([(s, 1) for _, s, _, _, _ in found] + [(e, -1) for _, _, e, _, _ in found])
    now = peak = 0
    for _, step in marks:
        now += step
        peak = max(peak, now)
    return peak


async def child_events(heat: Heat, stack_id: str) -> list[asyncpg.Record]:
    child = (await heat.run(heat.hc.resources.get, stack_id, "group")).physical_resource_id
    return await heat.cv.events(StackId(uuid.UUID(child)))


async def test_batch_create_creates_members_in_batches_of_max_batch_size_with_the_pause_between(
    heat: Heat,
) -> None:
    """batch_create {max_batch_size: 2, pause_time: 1}: 5 members in batches 0-1, 2-3, 4;
    no more than 2 in progress at once, each batch begun after the one before completed
    and at least pause_time later."""
    policy = {"batch_create": {"max_batch_size": 2, "pause_time": 1}}
    stack_id = await heat.create("batches", group(5, "v", policy))
    assert (await heat.settled(stack_id)).stack_status == "CREATE_COMPLETE"
    found = spans(await child_events(heat, stack_id), "CREATE")
    assert sorted(m for m, *_ in found) == ["0", "1", "2", "3", "4"]
    assert most_at_once(found) <= 2
    by_name = {m: (s, e, ts, te) for m, s, e, ts, te in found}
    for earlier, later in ((("0", "1"), ("2", "3")), (("2", "3"), ("4",))):
        done_seq = max(by_name[m][1] for m in earlier)
        done_at = max(by_name[m][3] for m in earlier)
        assert all(by_name[m][0] > done_seq for m in later), "a batch began before the one before it ended"
        assert all(by_name[m][2] - done_at >= 1.0 for m in later), "no pause between the batches"


async def test_rolling_update_updates_members_in_batches_leaving_min_in_service(heat: Heat) -> None:
    """rolling_update {max_batch_size: 3, min_in_service: 2} over 4 members: batches of
    min(3, 4 - 2) = 2 members, one batch after the other; it does not batch the create."""
    policy = {"rolling_update": {"max_batch_size": 3, "min_in_service": 2, "pause_time": 0}}
    stack_id = await heat.create("rolling", group(4, "v", policy))
    assert (await heat.settled(stack_id)).stack_status == "CREATE_COMPLETE"
    child = (await heat.run(heat.hc.resources.get, stack_id, "group")).physical_resource_id
    created = await heat.run(heat.hc.stacks.template, child)
    assert not any("depends_on" in r for r in created["resources"].values()), "a create is not batched"

    await heat.run(heat.hc.stacks.update, stack_id, template=group(4, "v2", policy))
    assert (await heat.settled(stack_id)).stack_status == "UPDATE_COMPLETE"
    updated = spans(await child_events(heat, stack_id), "UPDATE")
    assert sorted(m for m, *_ in updated) == ["0", "1", "2", "3"]
    assert most_at_once(updated) <= 2
    by_name = {m: (s, e) for m, s, e, _, _ in updated}
    assert min(by_name[m][0] for m in ("2", "3")) > max(by_name[m][1] for m in ("0", "1"))
    outputs = await heat.run(heat.hc.resources.list, stack_id, nested_depth=1)
    assert sorted(r.resource_status for r in outputs if r.resource_name.isdigit()) == ["UPDATE_COMPLETE"] * 4


async def test_an_update_policy_that_is_not_a_groups_is_refused_naming_where(heat: Heat) -> None:
    from heatclient import exc

    policy = {"rolling_update": {"max_batch_size": 0, "surge": 1}}
    with pytest.raises(exc.HTTPBadRequest) as refused:
        await heat.create("badpolicy", group(2, "v", policy))
    text = str(refused.value)
    assert "resources.group.update_policy.rolling_update.max_batch_size" in text
    assert "resources.group.update_policy.rolling_update.surge" in text
