"""Heat parity (issue 20 item 4): OS::Heat::ResourceChain, through python-heatclient.

Real: a Converge engine with its HTTP API on PostgreSQL (tests.support.convergence), the
worker and the plugins; the chain's members live in the test's pretend cloud
(`Test::Thing`, tests.support.world). Proves the chain's properties (`resources`,
`concurrent`, `resource_properties`), its attributes (`refs`, `attributes`,
`resource.<n>`, any attribute as a list), that an unordered chain is created in order,
that an update changes only the members whose entry changed, and that `POST /validate`
names a bad member under its entry.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from services.engine.core.model import StackId
from tests.support import heat_parity
from tests.support.heat_parity import HeatClients

pytestmark = pytest.mark.integration


@pytest.fixture
async def heat(database_url: str, tmp_path: Path) -> AsyncIterator[HeatClients]:
    async with heat_parity.serving(HeatClients, database_url, tmp_path) as running:
        yield running


def chain(types: list[str], *, concurrent: bool | None = None, value: str = "v1") -> dict[str, Any]:
    props: dict[str, Any] = {"resources": types, "resource_properties": {"value": value}}
    if concurrent is not None:
        props["concurrent"] = concurrent
    return {
        "heat_template_version": "2016-10-14",
        "resources": {"chain": {"type": "OS::Heat::ResourceChain", "properties": props}},
        "outputs": {
            "refs": {"value": {"get_attr": ["chain", "refs"]}},
            "values": {"value": {"get_attr": ["chain", "attributes", "value"]}},
            "first": {"value": {"get_attr": ["chain", "resource.0"]}},
            "second_value": {"value": {"get_attr": ["chain", "resource.1.value"]}},
            "ids": {"value": {"get_attr": ["chain", "id"]}},
            "stack": {"value": {"get_resource": "chain"}},
        },
    }


async def outputs(heat: HeatClients, stack_id: str) -> dict[str, Any]:
    stack = await heat.settled(stack_id)
    assert stack.stack_status.endswith("_COMPLETE"), stack.stack_status_reason
    return {o["output_key"]: o["output_value"] for o in stack.outputs}


async def test_a_chain_creates_its_members_in_order_with_the_shared_properties(heat: HeatClients) -> None:
    made = await heat.run(
        heat.hc.stacks.create,
        stack_name="chained",
        template=json.dumps(chain(["Test::Thing", "Test::Thing", "OS::Heat::TestResource"])),
    )
    out = await outputs(heat, made["stack"]["id"])
    things = sorted(heat.cv.world.live.values(), key=lambda r: int(r.physical_id.split("-")[1]))
    assert [r.name for r in things] == ["0", "1"], "member 0 is created before member 1"
    assert [r.properties["value"] for r in things] == ["v1", "v1"]
    assert out["refs"][:2] == [r.physical_id for r in things]
    assert len(out["refs"]) == 3
    assert out["refs"][2] is not None
    assert out["values"] == {"0": "v1", "1": "v1", "2": None}
    assert out["first"] == things[0].physical_id
    assert out["second_value"] == "v1"
    assert out["ids"] == [things[0].physical_id, things[1].physical_id, None]
    nested = await heat.run(heat.hc.stacks.get, out["stack"])
    assert nested.parent == made["stack"]["id"], "get_resource is the chain's child stack"
    members = {r.resource_name: r for r in await heat.run(heat.hc.resources.list, out["stack"])}
    assert {n: m.resource_type for n, m in members.items()} == {
        "0": "Test::Thing",
        "1": "Test::Thing",
        "2": "OS::Heat::TestResource",
    }
    assert members["1"].required_by == ["2"]
    assert members["0"].required_by == ["1"]


async def test_a_concurrent_chain_has_no_order_and_an_update_changes_only_what_changed(
    heat: HeatClients,
) -> None:
    made = await heat.run(
        heat.hc.stacks.create,
        stack_name="together",
        template=json.dumps(chain(["Test::Thing", "Test::Thing"], concurrent=True)),
    )
    stack_id = made["stack"]["id"]
    out = await outputs(heat, stack_id)
    members = await heat.run(heat.hc.resources.list, out["stack"])
    assert all(m.required_by == [] for m in members), "concurrent members do not wait for each other"
    first = out["refs"]

    await heat.run(
        heat.hc.stacks.update,
        stack_id,
        template=json.dumps(chain(["Test::Thing", "OS::Heat::None", "Test::Thing"], concurrent=True)),
    )
    out = await outputs(heat, stack_id)
    assert out["refs"][0] == first[0], "an unchanged entry keeps its member"
    assert first[1] not in heat.cv.world.live, "an entry whose type changed is replaced"
    assert out["refs"][2] in heat.cv.world.live, "an added entry adds a member at the end"
    assert sorted(heat.cv.world.live) == sorted([first[0], out["refs"][2]])

    await heat.run(heat.hc.stacks.update, stack_id, template=json.dumps(chain(["Test::Thing"], value="v2")))
    out = await outputs(heat, stack_id)
    assert out["refs"] == [first[0]], "removed entries delete the last members"
    assert [r.properties["value"] for r in heat.cv.world.live.values()] == ["v2"]

    await heat.run(heat.hc.stacks.delete, stack_id)
    await heat.cv.settled(StackId(uuid.UUID(stack_id)))
    assert heat.cv.world.live == {}


async def test_validate_names_a_bad_chain_member_under_its_entry(heat: HeatClients) -> None:
    from heatclient import exc

    template = chain(["Test::Thing", "OS::Heat::TestResource"])
    template["resources"]["chain"]["properties"]["resource_properties"] = {"no_such": 1}
    with pytest.raises(exc.HTTPBadRequest) as refused:
        await heat.run(heat.hc.stacks.validate, template=json.dumps(template))
    assert "resources.chain.properties.resources[0]" in str(refused.value)
    bad_type = chain(["Test::Thing", "No::Such::Type"])
    with pytest.raises(exc.HTTPBadRequest) as refused:
        await heat.run(heat.hc.stacks.validate, template=json.dumps(bad_type))
    assert "resources.chain.properties.resources[1]" in str(refused.value)
    assert "No::Such::Type" in str(refused.value)


async def test_a_chain_member_may_be_a_type_the_registry_maps(heat: HeatClients) -> None:
    member = {
        "heat_template_version": "2016-10-14",
        "parameters": {"value": {"type": "string"}},
        "resources": {"inner": {"type": "Test::Thing", "properties": {"value": {"get_param": "value"}}}},
        "outputs": {"value": {"value": {"get_attr": ["inner", "value"]}}},
    }
    environment = {"resource_registry": {"My::Alias": "Test::Thing", "My::Nested": "member.yaml"}}
    made = await heat.run(
        heat.hc.stacks.create,
        stack_name="mapped",
        template=json.dumps(chain(["My::Alias", "My::Nested"], value="m")),
        environment=environment,
        files={"member.yaml": json.dumps(member)},
    )
    out = await outputs(heat, made["stack"]["id"])
    assert out["values"] == {"0": "m", "1": "m"}, "an alias and a template resource, both given the value"
    assert sorted(heat.values()) == ["m", "m"]
