"""Heat parity (issue 19 item 6): update arguments with Heat's meaning — PATCH merges,
`clear_parameters`, a template that drops a parameter, `converge: true`, and the tags,
timeout and rollback setting an update changes — as OpenStack Heat 27's
`_prepare_stack_updates` and `Environment.load` give them.

Real: the engine's HTTP app over real HTTP, PostgreSQL, the engine, worker and observer
(in-process bus), python-heatclient unmodified and the real `openstack` CLI. The cloud is
a `World` of Test::Thing resources, changed behind Converge's back where a test says so.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.heat_parity import HeatClients, serving

pytestmark = pytest.mark.integration

TEMPLATE: dict[str, Any] = {
    "heat_template_version": "2016-10-14",
    "parameters": {
        "a": {"type": "string", "default": "A0"},
        "b": {"type": "string", "default": "B0"},
        "pd": {"type": "string", "default": "PD0"},
    },
    "resources": {
        "thing": {
            "type": "Test::Thing",
            "properties": {"value": {"list_join": ["-", [{"get_param": "a"}, {"get_param": "b"}]]}},
        }
    },
    "outputs": {"pd": {"value": {"get_param": "pd"}}},
}


Heat = HeatClients


@pytest.fixture
async def heat(database_url: str, tmp_path: Path) -> AsyncIterator[Heat]:
    async with serving(Heat, database_url, tmp_path) as heat:
        yield heat


async def test_patch_merges_parameters_and_environment_and_clear_parameters_resets(heat: Heat) -> None:
    """Heat's `existing` update: parameters and parameter_defaults merge per name (the
    audit saw a PATCH of one default wipe the others), `clear_parameters` forgets values."""
    created = await heat.run(
        heat.hc.stacks.create,
        stack_name="merge",
        template=TEMPLATE,
        parameters={"a": "A1", "b": "B1"},
        environment={"parameter_defaults": {"pd": "PD1", "unused": "u"}},
    )
    stack_id = created["stack"]["id"]
    await heat.settled(stack_id)
    assert heat.values() == ["A1-B1"]

    await heat.run(
        heat.hc.stacks.update,
        stack_id,
        existing=True,
        parameters={"b": "B2"},
        environment={"parameter_defaults": {"other": "o"}},
    )
    stack = await heat.settled(stack_id)
    assert stack.stack_status == "UPDATE_COMPLETE"
    assert heat.values() == ["A1-B2"]
    assert {o["output_key"]: o["output_value"] for o in stack.outputs} == {"pd": "PD1"}
    environment = await heat.run(heat.hc.stacks.environment, stack_id)
    assert environment["parameter_defaults"] == {"pd": "PD1", "unused": "u", "other": "o"}

    await heat.cli.ok("stack", "update", "merge", "--existing", "--clear-parameter", "a", "--wait")
    stack = await heat.settled(stack_id)
    assert (stack.stack_status, stack.parameters["a"], stack.parameters["b"]) == (
        "UPDATE_COMPLETE",
        "A0",
        "B2",
    )
    assert heat.values() == ["A0-B2"]


async def test_a_patch_whose_template_drops_a_parameter_succeeds_and_forgets_its_value(heat: Heat) -> None:
    created = await heat.run(
        heat.hc.stacks.create, stack_name="drop", template=TEMPLATE, parameters={"a": "A1", "b": "B1"}
    )
    stack_id = created["stack"]["id"]
    await heat.settled(stack_id)
    smaller = {
        **TEMPLATE,
        "parameters": {"a": TEMPLATE["parameters"]["a"]},
        "resources": {"thing": {"type": "Test::Thing", "properties": {"value": {"get_param": "a"}}}},
        "outputs": {},
    }
    await heat.run(heat.hc.stacks.update, stack_id, existing=True, template=smaller)
    stack = await heat.settled(stack_id)
    assert stack.stack_status == "UPDATE_COMPLETE"
    assert "b" not in stack.parameters
    assert heat.values() == ["A1"]


async def test_tags_timeout_and_rollback_given_to_an_update_are_stored(heat: Heat) -> None:
    """Heat: an update stores the tags, timeout and disable_rollback it gives; a PUT without
    tags leaves none, a PATCH without them keeps them; timeout and rollback are kept when
    not given."""
    created = await heat.run(
        heat.hc.stacks.create,
        stack_name="settings",
        template=TEMPLATE,
        tags="t1",
        timeout_mins=5,
        disable_rollback=True,
    )
    stack_id = created["stack"]["id"]
    await heat.settled(stack_id)

    await heat.run(
        heat.hc.stacks.update,
        stack_id,
        template=TEMPLATE,
        tags="t2,t3",
        timeout_mins=7,
        disable_rollback=False,
    )
    stack = await heat.settled(stack_id)
    assert (stack.tags, stack.timeout_mins, stack.disable_rollback) == (["t2", "t3"], 7, False)

    await heat.run(heat.hc.stacks.update, stack_id, existing=True, parameters={"a": "A9"})
    stack = await heat.settled(stack_id)
    assert (stack.tags, stack.timeout_mins, stack.disable_rollback) == (["t2", "t3"], 7, False)
    shown = await heat.cli.json("stack", "show", "settings")
    assert (shown["tags"], shown["timeout_mins"], shown["disable_rollback"]) == (["t2", "t3"], 7, False)

    await heat.run(heat.hc.stacks.update, stack_id, template=TEMPLATE)
    stack = await heat.settled(stack_id)
    assert (stack.tags, stack.timeout_mins, stack.disable_rollback) == (None, 7, False)


async def test_converge_true_corrects_what_changed_out_of_band(heat: Heat) -> None:
    """`converge: true` observes each resource before deciding, so an update to the same
    template puts back a value changed behind Converge's back and re-creates a resource
    that was deleted; without it the update has nothing to do."""
    template = {
        "heat_template_version": "2016-10-14",
        "resources": {
            "kept": {"type": "Test::Thing", "properties": {"value": "v"}},
            "lost": {"type": "Test::Thing", "properties": {"value": "w"}},
        },
    }
    created = await heat.run(heat.hc.stacks.create, stack_name="drifts", template=template)
    stack_id = created["stack"]["id"]
    await heat.settled(stack_id)
    world = heat.cv.world
    world.by_name()["kept"][0].properties["value"] = "changed out of band"
    lost = world.by_name()["lost"][0].physical_id
    del world.live[lost]

    await heat.run(heat.hc.stacks.update, stack_id, existing=True)
    await heat.settled(stack_id)
    assert heat.values() == ["changed out of band"], "without converge nothing is observed"

    await heat.cli.ok("stack", "update", "drifts", "--existing", "--converge", "--wait")
    stack = await heat.settled(stack_id)
    assert stack.stack_status == "UPDATE_COMPLETE"
    assert heat.values() == ["v", "w"]
    events = await heat.run(heat.hc.events.list, stack_id, resource_name="kept")
    assert "Observed before deciding the update: changed out of band: value" in [
        e.resource_status_reason for e in events
    ]


async def test_converge_is_refused_on_create_as_heat_refuses_it(heat: Heat) -> None:
    from heatclient import exc

    with pytest.raises(exc.HTTPBadRequest) as refused:
        await heat.run(
            heat.hc.http_client.post,
            "/stacks",
            data={"stack_name": "early", "template": TEMPLATE, "converge": True},
        )
    assert "converge flag only supported in stack update (or update preview) request." in str(refused.value)
