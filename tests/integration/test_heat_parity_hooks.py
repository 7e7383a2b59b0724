"""Heat parity (issue 19 items 3 and 4): resource metadata and resource_facade, and hooks as
breakpoints in the converging graph, checked against what OpenStack Heat 27 gives.

Real: the engine's HTTP app over real HTTP, PostgreSQL, the engine, worker and observer
(in-process bus), python-heatclient unmodified and the real `openstack` CLI. The cloud is
a `World` of Test::Thing resources, so each test sees what really happened to them.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from services.engine.core.model import StackId, forward
from services.engine.messages import CheckResource
from services.engine.recovery import Recovery
from shared.protocol import ENGINE_QUEUE
from tests.support.convergence import Converge
from tests.support.heat_parity import HeatClients, serving
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

PAUSED = "CREATE paused until Hook pre-create is cleared"  # Heat's text (resource._break_if_required)


class Heat(HeatClients):
    async def create(self, name: str, template: dict[str, Any], **fields: Any) -> str:
        created = await self.run(self.hc.stacks.create, stack_name=name, template=template, **fields)
        return str(created["stack"]["id"])

    async def status(self, stack_id: str) -> str:
        return str((await self.run(self.hc.stacks.get, stack_id)).stack_status)

    async def until(self, stack_id: str, wanted: str) -> None:
        await self.cv.settled(StackId(uuid.UUID(stack_id)), timeout=60)
        assert await self.status(stack_id) == wanted

    async def reasons(self, stack_id: str, resource: str) -> list[str]:
        events = await self.run(self.hc.events.list, stack_id, resource_name=resource)
        return [e.resource_status_reason for e in events]


@pytest.fixture
async def heat(database_url: str, tmp_path: Path) -> AsyncIterator[Heat]:
    async with serving(Heat, database_url, tmp_path) as heat:
        yield heat


def thing(value: str, **extra: Any) -> dict[str, Any]:
    return {"type": "Test::Thing", "properties": {"value": value, **extra}}


# -- metadata ------------------------------------------------------------------------


async def test_metadata_is_resolved_stored_and_served_and_an_update_changes_it_in_place(heat: Heat) -> None:
    """Heat serves a resource's resolved metadata from GET .../metadata and in resource
    show; a change of metadata alone updates it without an update of the real resource."""
    template: dict[str, Any] = {
        "heat_template_version": "2016-10-14",
        "resources": {
            "a": thing("v"),
            "b": {**thing("w"), "metadata": {"from_a": {"get_attr": ["a", "value"]}, "fixed": 1}},
        },
    }
    stack_id = await heat.create("meta", template)
    await heat.until(stack_id, "CREATE_COMPLETE")
    assert await heat.run(heat.hc.resources.metadata, stack_id, "b") == {"from_a": "v", "fixed": 1}
    shown = await heat.run(heat.hc.resources.get, stack_id, "b")
    assert shown.metadata == {"from_a": "v", "fixed": 1}
    assert await heat.run(heat.hc.resources.metadata, stack_id, "a") == {}
    real_b = heat.cv.world.by_name()["b"][0]

    template["resources"]["b"]["metadata"]["fixed"] = 2
    await heat.run(heat.hc.stacks.update, stack_id, template=template)
    await heat.until(stack_id, "UPDATE_COMPLETE")
    assert await heat.cli.json("stack", "resource", "metadata", stack_id, "b") == {"from_a": "v", "fixed": 2}
    assert heat.cv.world.by_name()["b"] == [real_b], "the real resource was left as it was"
    events = await heat.run(heat.hc.events.list, stack_id, resource_name="b")
    assert "UPDATE_IN_PROGRESS" not in [e.resource_status for e in events], "no update job ran"


async def test_resource_facade_gives_a_template_resource_its_parent_metadata_and_policies(heat: Heat) -> None:
    """Heat's ResourceFacade: in the child of a template resource, `resource_facade`
    returns the parent resource's resolved metadata, deletion_policy and update_policy; a
    change of the parent's metadata alone reaches the child."""
    inner = {
        "heat_template_version": "2016-10-14",
        "resources": {"v": {"type": "OS::Heat::Value", "properties": {"value": "x"}}},
        "outputs": {
            "meta": {"value": {"resource_facade": "metadata"}},
            "policy": {"value": {"resource_facade": "deletion_policy"}},
            "updates": {"value": {"resource_facade": "update_policy"}},
        },
    }
    template: dict[str, Any] = {
        "heat_template_version": "2016-10-14",
        "resources": {
            "source": thing("db1"),
            "inner": {
                "type": "inner.yaml",
                "metadata": {"role": {"get_attr": ["source", "value"]}},
                "deletion_policy": "Retain",
                "update_policy": {"batch": 2},
            },
        },
        "outputs": {name: {"value": {"get_attr": ["inner", name]}} for name in ("meta", "policy", "updates")},
    }
    files = {"inner.yaml": _yaml(inner)}
    stack_id = await heat.create("facade", template, files=files)
    await heat.until(stack_id, "CREATE_COMPLETE")
    outputs = await _outputs(heat, stack_id)
    assert outputs == {"meta": {"role": "db1"}, "policy": "Retain", "updates": {"batch": 2}}

    template["resources"]["inner"]["metadata"] = {"role": "replica"}
    await heat.run(heat.hc.stacks.update, stack_id, template=template, files=files)
    await heat.until(stack_id, "UPDATE_COMPLETE")
    assert (await _outputs(heat, stack_id))["meta"] == {"role": "replica"}


# -- hooks -------------------------------------------------------------------------------


async def test_a_pre_create_hook_pauses_only_its_resource_and_what_depends_on_it(heat: Heat) -> None:
    """A hook matched by a name pattern pauses that resource's create; the rest of the graph
    converges, the dependent waits, recovery's checks and the stall sweep leave it paused,
    `openstack stack hook poll` lists it and `stack hook clear` lets it go on."""
    template = {
        "heat_template_version": "2016-10-14",
        "resources": {
            "free": thing("f"),
            "held": thing("h"),
            "after": thing("a", ref={"get_resource": "held"}),
        },
    }
    environment = {"resource_registry": {"resources": {"hel*": {"hooks": "pre-create"}}}}
    stack_id = await heat.create("breaks", template, environment=environment)

    async def states() -> dict[str, str]:
        listed = await heat.run(heat.hc.resources.list, stack_id)
        return {r.resource_name: r.resource_status for r in listed}

    async def paused() -> bool:
        free_done = (await states())["free"] == "CREATE_COMPLETE"
        return free_done and PAUSED in await heat.reasons(stack_id, "held")

    await eventually(paused, timeout=30)
    assert await states() == {"free": "CREATE_COMPLETE", "held": "INIT_COMPLETE", "after": "INIT_COMPLETE"}
    assert await heat.status(stack_id) == "CREATE_IN_PROGRESS"

    # What recovery sends (a check of every ready node) changes nothing: the node stays paused.
    await _check_again(heat.cv, stack_id, "held")
    sweep = Recovery(store=heat.cv.engine.store, outbox=heat.cv.engine.outbox, stall_seconds=1)
    stalled = Recovery(
        store=heat.cv.engine.store,
        outbox=heat.cv.engine.outbox,
        stall_seconds=1,
        clock=lambda: time.time() + 3600,
    )
    assert await stalled.recover_stalled() == 0, "a stack paused at a hook waits for its user"
    assert await sweep.recover_everything() == 1
    assert (await heat.reasons(stack_id, "held")).count(PAUSED) == 1
    assert await heat.status(stack_id) == "CREATE_IN_PROGRESS"
    assert "held" not in heat.cv.world.by_name()

    # heatclient finds the events of the operation by the stack's name (as with Heat).
    polled = await heat.cli.json("stack", "hook", "poll", "breaks")
    assert [(h["Resource Name"], h["Resource Status Reason"]) for h in polled] == [("held", PAUSED)]
    await heat.cli.ok("stack", "hook", "clear", "--pre-create", "breaks", "held")
    await heat.until(stack_id, "CREATE_COMPLETE")
    assert "Hook pre-create is cleared" in await heat.reasons(stack_id, "held")
    assert sorted(heat.cv.world.by_name()) == ["after", "free", "held"]

    again = await heat.cli.run(
        "stack", "resource", "signal", stack_id, "held", "--data", '{"unset_hook": "pre-create"}'
    )
    assert again.code != 0
    assert 'The "pre-create" hook is not defined on resource held' in again.err


async def test_pre_update_and_pre_delete_hooks_pause_updates_and_deletes(heat: Heat) -> None:
    """As in Heat: `stack update --pre-update` pauses each named resource before it is
    updated; a `pre-delete` hook pauses a stack delete before the resource is deleted."""
    template = {"heat_template_version": "2016-10-14", "resources": {"a": thing("1"), "b": thing("1")}}
    environment = {"resource_registry": {"resources": {"b": {"hooks": ["pre-delete"]}}}}
    stack_id = await heat.create("lifecycle", template, environment=environment)
    await heat.until(stack_id, "CREATE_COMPLETE")

    path = heat.cli.home / "v2.yaml"
    path.write_text(_yaml({**template, "resources": {"a": thing("2"), "b": thing("2")}}))
    await heat.cli.ok("stack", "update", stack_id, "-t", str(path), "--existing", "--pre-update", "a")
    update_paused = "UPDATE paused until Hook pre-update is cleared"
    await eventually(lambda: _has(heat, stack_id, "a", update_paused), timeout=30)
    assert [r.properties["value"] for r in heat.cv.world.by_name()["a"]] == ["1"]
    polled = await heat.cli.json("stack", "hook", "poll", "lifecycle")
    assert [h["Resource Name"] for h in polled] == ["a"]
    await heat.cli.ok("stack", "hook", "clear", "--pre-update", "lifecycle", "a")
    await heat.until(stack_id, "UPDATE_COMPLETE")
    assert [r.properties["value"] for r in heat.cv.world.by_name()["a"]] == ["2"]

    await heat.run(heat.hc.stacks.delete, stack_id)
    delete_paused = "DELETE paused until Hook pre-delete is cleared"
    await eventually(lambda: _has(heat, stack_id, "b", delete_paused), timeout=30)
    assert "b" in heat.cv.world.by_name()
    assert (await heat.cli.json("stack", "hook", "poll", "lifecycle"))[0]["Resource Name"] == "b"
    await heat.cli.ok("stack", "hook", "clear", "--pre-delete", "lifecycle", "b")
    await heat.cv.settled(StackId(uuid.UUID(stack_id)), timeout=60)
    assert heat.cv.world.live == {}


async def test_a_hook_in_a_nested_section_pauses_the_child_stack_resource(heat: Heat) -> None:
    """Heat hands a nested resource's section of `resources` to its child stack: the hook
    pauses the child's resource, found by `hook poll --nested-depth` and cleared by path."""
    inner = {"heat_template_version": "2016-10-14", "resources": {"deep": thing("d")}}
    template = {"heat_template_version": "2016-10-14", "resources": {"outer": {"type": "inner.yaml"}}}
    environment = {"resource_registry": {"resources": {"outer": {"deep": {"hooks": "pre-create"}}}}}
    stack_id = await heat.create(
        "nested", template, environment=environment, files={"inner.yaml": _yaml(inner)}
    )

    async def paused() -> bool:
        polled = await heat.cli.json("stack", "hook", "poll", "--nested-depth", "1", "nested")
        return [h["Resource Name"] for h in polled] == ["deep"]

    await eventually(paused, timeout=60, every=0.5)
    await heat.cli.ok("stack", "hook", "clear", "--pre-create", "nested", "outer/deep")
    await heat.until(stack_id, "CREATE_COMPLETE")
    assert list(heat.cv.world.by_name()) == ["deep"]


async def test_hook_types_heat_knows_but_converge_does_not_run_are_refused_by_name(heat: Heat) -> None:
    from heatclient import exc

    template = {"heat_template_version": "2016-10-14", "resources": {"a": thing("1")}}
    for hook, message in (
        ("post-create", "hook 'post-create' is not supported by Converge"),
        ("pre-boot", "invalid hook type 'pre-boot'"),
    ):
        environment = {"resource_registry": {"resources": {"a": {"hooks": hook}}}}
        with pytest.raises(exc.HTTPBadRequest) as refused:
            await heat.create(f"bad-{hook}", template, environment=environment)
        assert "environment.resource_registry.resources.a.hooks" in str(refused.value)
        assert message in str(refused.value)


# -- helpers ---------------------------------------------------------------------------------


async def _has(heat: Heat, stack_id: str, resource: str, reason: str) -> bool:
    return reason in await heat.reasons(stack_id, resource)


async def _outputs(heat: Heat, stack_id: str) -> dict[str, Any]:
    stack = await heat.run(heat.hc.stacks.get, stack_id)
    return {o["output_key"]: o["output_value"] for o in stack.outputs}


async def _check_again(cv: Converge, stack_id: str, name: str) -> None:
    """Send the check recovery would send for `name`'s node, and wait until it is handled."""
    row = await cv.pool.fetchrow(
        """SELECT r.resource_id, s.current_traversal FROM resources r JOIN stacks s USING (stack_id)
           WHERE r.stack_id = $1 AND r.name = $2""",
        uuid.UUID(stack_id),
        name,
    )
    assert row is not None
    check = CheckResource(
        stack_id=uuid.UUID(stack_id),
        traversal_id=row["current_traversal"],
        node=forward(row["resource_id"]),
        resource_id=row["resource_id"],
    )
    await cv.engine.bus.publish(ENGINE_QUEUE, check)

    async def handled() -> bool:
        return bool(await cv.pool.fetchval("SELECT 1 FROM inbox WHERE message_id = $1", check.id))

    await eventually(handled, timeout=30)


def _yaml(document: dict[str, Any]) -> str:
    import yaml

    return str(yaml.safe_dump(document))


async def test_clearing_a_hook_needs_a_project_token_not_a_handles(heat: Heat) -> None:
    """A wait-condition handle's own token signals that handle and nothing more: it cannot
    clear the hook the handle is paused at (401, as a wrong token); a project token can."""
    import aiohttp

    template = {
        "heat_template_version": "2016-10-14",
        "resources": {"h": {"type": "OS::Heat::WaitConditionHandle"}},
    }
    stack_id = await heat.create("handles", template)
    await heat.until(stack_id, "CREATE_COMPLETE")
    token = (await heat.run(heat.hc.resources.get, stack_id, "h")).attributes["token"]
    environment = {"resource_registry": {"resources": {"h": {"hooks": "pre-update"}}}}
    await heat.run(heat.hc.stacks.update, stack_id, existing=True, environment=environment)
    update_paused = "UPDATE paused until Hook pre-update is cleared"
    await eventually(lambda: _has(heat, stack_id, "h", update_paused), timeout=30)

    url = f"{heat.cli.endpoint}/stacks/handles/{stack_id}/resources/h/signal"
    async with aiohttp.ClientSession() as http:
        for who, status in ((token, 401), ("t1", 200)):
            body = {"unset_hook": "pre-update"}
            async with http.post(url, json=body, headers={"X-Auth-Token": who}) as answer:
                assert answer.status == status, await answer.text()
    await heat.until(stack_id, "UPDATE_COMPLETE")
