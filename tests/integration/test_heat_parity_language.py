"""Heat parity (issue 19 items 2 and 10): `yaql` in TripleO-style templates, and the results
that used to differ from OpenStack Heat 27 — `list_concat_unique` order, `get_attr: [group,
resource.N]`, a TestResource's physical id across an in-place update.

Real: the engine's HTTP app over real HTTP, PostgreSQL, the engine, worker and observer
(in-process bus), python-heatclient unmodified and the real `openstack` CLI; for the
check-time path, a real template pool (worker processes), and `converge up` with its own.
Expected values are what Heat gives, computed by hand from yaql's semantics (`where`,
`select`, `selectMany`, `distinct`, `toDict`, `dict`, `concat`, `switch`) and Heat's
functions.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from services.engine.resolving import Resolved, ValuesNeeded, goal_values
from services.engine.template import ResolutionError, ResourceData, load_stack
from services.engine.template.definition import StackIdentity
from services.engine.template_pool import TemplatePool
from shared.plugins.registry import load_types
from tests.support.cli import running_up
from tests.support.heat_parity import HeatClients, serving

pytestmark = pytest.mark.integration


ROLES = [
    {"name": "Controller", "count": 3, "networks": ["External", "InternalApi", "Storage"]},
    {"name": "Compute", "count": 2, "networks": ["InternalApi", "Storage", "Tenant"]},
    {"name": "CephStorage", "count": 0, "networks": ["Storage", "StorageMgmt"]},
]
NETWORKS = [
    {"name": "ctlplane", "cidr": "192.168.24.0/24", "ipv6": False},
    {"name": "internal_api", "cidr": "fd00:fd00:fd00:2000::/64", "ipv6": True},
]


def _yaql(expression: str, **data: Any) -> dict[str, Any]:
    return {"yaql": {"expression": expression, "data": data}}


ROLES_PARAM = {"get_param": "Roles"}

#: Shapes from tripleo-heat-templates (network/deployed_networks.yaml, network/ports/vip.yaml,
#: roles_data-driven maps), with OpenStack types mapped to OS::Heat::None by the environment.
TRIPLEO: dict[str, Any] = {
    "heat_template_version": "rocky",
    "parameters": {
        "Roles": {"type": "json", "default": ROLES},
        "FixedIPs": {"type": "json", "default": []},
        "NetworkData": {"type": "json", "default": NETWORKS},
    },
    "conditions": {
        "fixed_ip_not_set": {
            "equals": [
                {
                    "yaql": {
                        "expression": "$.data.where($.get('ip_address'))",
                        "data": {"get_param": "FixedIPs"},
                    }
                },
                [],
            ]
        },
        "has_ceph": _yaql(
            "$.data.roles.where($.name = 'CephStorage' and $.count > 0).any()", roles=ROLES_PARAM
        ),
    },
    "resources": {
        "ExternalNet": {"type": "OS::Neutron::Net", "properties": {"name": "external"}},
        "VipPort": {
            "type": "OS::Neutron::Port",
            "condition": "fixed_ip_not_set",
            "properties": {"network": {"get_resource": "ExternalNet"}},
        },
        "CephPool": {"type": "OS::Heat::None", "condition": "has_ceph"},
        "NetworkSource": {"type": "OS::Heat::Value", "properties": {"value": {"get_param": "NetworkData"}}},
        "NetworkCidrMap": {
            "type": "OS::Heat::Value",
            "properties": {
                "value": _yaql(
                    "$.data.nets.toDict($.name, $.cidr)", nets={"get_attr": ["NetworkSource", "value"]}
                )
            },
        },
        "NetworkIpVersionMap": {
            "type": "OS::Heat::Value",
            "properties": {
                "value": {
                    "map_merge": [
                        {"ctlplane": _yaql("switch($.data.ipv6 => 6, true => 4)", ipv6=False)},
                        _yaql(
                            "dict($.data.nets.where($.name != 'ctlplane')"
                            ".select([$.name, switch($.ipv6 => 6, true => 4)]))",
                            nets={"get_param": "NetworkData"},
                        ),
                    ]
                }
            },
        },
    },
    "outputs": {
        "enabled_roles": {
            "value": _yaql("$.data.roles.where($.count > 0).select($.name)", roles=ROLES_PARAM)
        },
        "role_networks": {
            "value": _yaql("dict($.data.roles.select([$.name, $.networks]))", roles=ROLES_PARAM)
        },
        "all_networks": {
            "value": _yaql(
                "$.data.roles.where($.count > 0).selectMany($.networks).distinct()", roles=ROLES_PARAM
            )
        },
        "role_counts": {"value": _yaql("$.data.roles.toDict($.name, $.count)", roles=ROLES_PARAM)},
        "hostname_formats": {
            "value": _yaql(
                "$.data.roles.select(concat($.name.toLower(), '-', str($.count)))", roles=ROLES_PARAM
            )
        },
        "vip_ip": {"value": {"if": ["fixed_ip_not_set", "from-port", "fixed"]}},
        "ceph": {"value": {"if": ["has_ceph", "ceph", "no_ceph"]}},
        "cidrs": {"value": {"get_attr": ["NetworkCidrMap", "value"]}},
        "ip_versions": {"value": {"get_attr": ["NetworkIpVersionMap", "value"]}},
        "unique": {"value": {"list_concat_unique": [["a", "b", "x"], ["b", "c"], ["x", "y", "x"]]}},
    },
}
ENVIRONMENT = {
    "resource_registry": {"OS::Neutron::Net": "OS::Heat::None", "OS::Neutron::Port": "OS::Heat::None"}
}

#: What Heat gives for TRIPLEO with its defaults (worked out from yaql's semantics).
EXPECTED_OUTPUTS = {
    "enabled_roles": ["Controller", "Compute"],
    "role_networks": {
        "Controller": ["External", "InternalApi", "Storage"],
        "Compute": ["InternalApi", "Storage", "Tenant"],
        "CephStorage": ["Storage", "StorageMgmt"],
    },
    "all_networks": ["External", "InternalApi", "Storage", "Tenant"],
    "role_counts": {"Controller": 3, "Compute": 2, "CephStorage": 0},
    "hostname_formats": ["controller-3", "compute-2", "cephstorage-0"],
    "vip_ip": "from-port",
    "ceph": "no_ceph",
    "cidrs": {"ctlplane": "192.168.24.0/24", "internal_api": "fd00:fd00:fd00:2000::/64"},
    "ip_versions": {"ctlplane": 4, "internal_api": 6},
    "unique": ["a", "b", "x", "c", "y"],
}


class Heat(HeatClients):
    async def outputs(self, stack_id: str) -> dict[str, Any]:
        stack = await self.run(self.hc.stacks.get, stack_id)
        return {o["output_key"]: o["output_value"] for o in stack.outputs}


@pytest.fixture
async def heat(database_url: str, tmp_path: Path) -> AsyncIterator[Heat]:
    async with serving(Heat, database_url, tmp_path) as heat:
        yield heat


async def test_a_tripleo_style_yaql_template_validates_and_creates_with_heats_outputs(heat: Heat) -> None:
    validated = await heat.run(heat.hc.stacks.validate, template=TRIPLEO, environment=ENVIRONMENT)
    assert set(validated["Parameters"]) == {"Roles", "FixedIPs", "NetworkData"}

    created = await heat.run(
        heat.hc.stacks.create, stack_name="overcloud", template=TRIPLEO, environment=ENVIRONMENT
    )
    stack_id = created["stack"]["id"]
    stack = await heat.settled(stack_id)
    assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
    assert await heat.outputs(stack_id) == EXPECTED_OUTPUTS
    names = {r.resource_name for r in await heat.run(heat.hc.resources.list, stack_id)}
    assert names == {"ExternalNet", "VipPort", "NetworkSource", "NetworkCidrMap", "NetworkIpVersionMap"}

    # Parameters change what the yaql conditions and maps give, as in Heat.
    roles = [{**ROLES[2], "count": 1}, ROLES[0]]
    await heat.run(
        heat.hc.stacks.update,
        stack_id,
        existing=True,
        parameters={"Roles": roles, "FixedIPs": [{"ip_address": "10.0.0.5"}]},
    )
    stack = await heat.settled(stack_id)
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    outputs = await heat.outputs(stack_id)
    assert outputs["enabled_roles"] == ["CephStorage", "Controller"]
    assert outputs["all_networks"] == ["Storage", "StorageMgmt", "External", "InternalApi"]
    assert (outputs["vip_ip"], outputs["ceph"]) == ("fixed", "ceph")
    names = {r.resource_name for r in await heat.run(heat.hc.resources.list, stack_id)}
    assert "CephPool" in names
    assert "VipPort" not in names


async def test_the_openstack_cli_creates_the_tripleo_style_template_from_yaml_files(
    heat: Heat, tmp_path: Path
) -> None:
    (tmp_path / "overcloud.yaml").write_text(yaml.safe_dump(TRIPLEO))
    (tmp_path / "env.yaml").write_text(yaml.safe_dump(ENVIRONMENT))
    files = ("-t", str(tmp_path / "overcloud.yaml"), "-e", str(tmp_path / "env.yaml"))
    await heat.cli.ok("orchestration", "template", "validate", *files)
    await heat.cli.ok("stack", "create", *files, "--wait", "overcloud-cli")
    shown = await heat.cli.json("stack", "output", "show", "overcloud-cli", "all_networks")
    assert shown["output_value"] == EXPECTED_OUTPUTS["all_networks"]
    shown = await heat.cli.json("stack", "output", "show", "overcloud-cli", "role_counts")
    assert shown["output_value"] == EXPECTED_OUTPUTS["role_counts"]


async def test_a_bad_yaql_is_a_400_naming_its_path_and_creates_nothing(heat: Heat) -> None:
    from heatclient import exc

    template = {
        "heat_template_version": "rocky",
        "resources": {"v": {"type": "OS::Heat::Value", "properties": {"value": _yaql("$.data.(", x=1)}}},
    }
    for call in (heat.hc.stacks.validate, heat.hc.stacks.create):
        kwargs = {"stack_name": "bad"} if call == heat.hc.stacks.create else {}
        with pytest.raises(exc.HTTPBadRequest) as refused:
            await heat.run(call, template=template, **kwargs)
        assert "resources.v.properties.value.yaql: yaql: Bad expression" in str(refused.value)
    too_many = {
        "heat_template_version": "rocky",
        "resources": {"v": {"type": "OS::Heat::Value", "properties": {"value": _yaql("range(500).sum()")}}},
    }
    with pytest.raises(exc.HTTPBadRequest) as refused:
        await heat.run(heat.hc.stacks.create, stack_name="big", template=too_many)
    assert "exceeded yaql's limit of 200 items" in str(refused.value)
    assert await heat.run(lambda: list(heat.hc.stacks.list())) == []


async def test_a_yaql_failing_on_a_resources_attribute_fails_that_resource_naming_the_path(
    heat: Heat,
) -> None:
    template = {
        "heat_template_version": "rocky",
        "resources": {
            "dep": {"type": "OS::Heat::TestResource", "properties": {"value": "7"}},
            "v": {
                "type": "OS::Heat::Value",
                "properties": {"value": _yaql("int($.data.n) / 0", n={"get_attr": ["dep", "output"]})},
            },
        },
    }
    created = await heat.run(heat.hc.stacks.create, stack_name="fails", template=template)
    stack = await heat.settled(created["stack"]["id"])
    assert stack.stack_status == "CREATE_FAILED"
    failed = await heat.run(heat.hc.resources.get, created["stack"]["id"], "v")
    assert failed.resource_status == "CREATE_FAILED"
    assert "resources.v.properties.value.yaql: yaql: evaluating" in failed.resource_status_reason
    assert "ZeroDivisionError" in failed.resource_status_reason


async def test_get_attr_of_a_group_member_is_its_reference_id_and_its_attribute_with_a_path(
    heat: Heat,
) -> None:
    template = {
        "heat_template_version": "rocky",
        "resources": {
            "group": {
                "type": "OS::Heat::ResourceGroup",
                "properties": {
                    "count": 2,
                    "resource_def": {"type": "OS::Heat::TestResource", "properties": {"value": "v%index%"}},
                },
            }
        },
        "outputs": {
            "member": {"value": {"get_attr": ["group", "resource.1"]}},
            "member_output": {"value": {"get_attr": ["group", "resource.1", "output"]}},
            "member_dotted": {"value": {"get_attr": ["group", "resource.1.output"]}},
            "refs": {"value": {"get_attr": ["group", "refs"]}},
        },
    }
    created = await heat.run(heat.hc.stacks.create, stack_name="grp", template=template)
    stack_id = created["stack"]["id"]
    assert (await heat.settled(stack_id)).stack_status == "CREATE_COMPLETE"
    outputs = await heat.outputs(stack_id)
    assert isinstance(outputs["member"], str)
    assert outputs["member"] == outputs["refs"][1]
    assert outputs["member_output"] == outputs["member_dotted"] == "v1"


async def test_a_test_resource_keeps_its_physical_id_across_an_in_place_update_with_a_wait(
    heat: Heat,
) -> None:
    def template(value: str) -> dict[str, Any]:
        props = {"value": value, "action_wait_secs": {"create": 0.2, "update": 0.2}}
        return {
            "heat_template_version": "rocky",
            "resources": {"t": {"type": "OS::Heat::TestResource", "properties": props}},
        }

    created = await heat.run(heat.hc.stacks.create, stack_name="waits", template=template("a"))
    stack_id = created["stack"]["id"]
    assert (await heat.settled(stack_id)).stack_status == "CREATE_COMPLETE"
    before = await heat.run(heat.hc.resources.get, stack_id, "t")
    assert "~" not in before.physical_resource_id

    await heat.run(heat.hc.stacks.update, stack_id, template=template("b"))
    assert (await heat.settled(stack_id)).stack_status == "UPDATE_COMPLETE"
    after = await heat.run(heat.hc.resources.get, stack_id, "t")
    assert after.physical_resource_id == before.physical_resource_id
    assert after.attributes["output"] == "b"


async def test_a_check_time_yaql_runs_in_the_template_pool_and_a_runaway_one_is_stopped() -> None:
    """The value needs a resource's attribute, so it is evaluated when the resource is
    checked: in a worker process, stopped at the pool's timeout, failing the resource
    with the path (a regular expression that backtracks for ever cannot hold the loop,
    nor a database connection)."""
    template = {
        "heat_template_version": "rocky",
        "resources": {
            "dep": {"type": "OS::Heat::TestResource"},
            "v": {
                "type": "OS::Heat::Value",
                "properties": {
                    "value": _yaql("$.data.s.matches('^(a+)+$')", s={"get_attr": ["dep", "output"]})
                },
            },
        },
    }
    types = load_types()
    stack = load_stack(template, types=types, identity=StackIdentity("s", "sid", "pid"))
    pool = TemplatePool(workers=1, timeout_seconds=5, memory_bytes=512 * 1024 * 1024)
    try:
        await pool.start()
        quick = {"dep": ResourceData("d", {"output": "aaaa"})}
        assert await goal_values(pool, stack, "v", quick) == ({"value": True}, {})
        # A node check never waits for the pool in its transaction: it asks for the values,
        # the handler resolves them with no transaction open, and the check takes them.
        resolved = Resolved()
        with pytest.raises(ValuesNeeded) as needed:
            await resolved.goal_values(pool, stack, "v", quick, "template-1")
        await resolved.resolve(pool, needed.value)
        assert await resolved.goal_values(pool, stack, "v", quick, "template-1") == ({"value": True}, {})
        with pytest.raises(ValuesNeeded):  # other data: resolved again
            await resolved.goal_values(
                pool, stack, "v", {"dep": ResourceData("d", {"output": "b"})}, "template-1"
            )

        runaway = {"dep": ResourceData("d", {"output": "a" * 40 + "!"})}
        with pytest.raises(ValuesNeeded) as needed:
            await resolved.goal_values(pool, stack, "v", runaway, "template-1")
        await resolved.resolve(pool, needed.value)
        with pytest.raises(ResolutionError) as stopped:
            await resolved.goal_values(pool, stack, "v", runaway, "template-1")
        assert stopped.value.path == "resources.v.properties"
        assert "took longer than 5 s" in str(stopped.value)
    finally:
        pool.close()


async def test_converge_up_evaluates_yaql_on_attributes_in_its_template_workers(tmp_path: Path) -> None:
    """The whole product: `converge up` (its template pool, its engine checks) creates a
    stack whose yaql needs a resource attribute, through heatclient."""
    from heatclient import client as heatclient

    template = {
        "heat_template_version": "rocky",
        "resources": {
            "nets": {"type": "OS::Heat::Value", "properties": {"value": NETWORKS}},
            "cidrs": {
                "type": "OS::Heat::Value",
                "properties": {
                    "value": {
                        "yaql": {
                            "expression": "$.data.toDict($.name, $.cidr)",
                            "data": {"get_attr": ["nets", "value"]},
                        }
                    }
                },
            },
        },
        "outputs": {"cidrs": {"value": {"get_attr": ["cidrs", "value"]}}},
    }
    with running_up(tmp_path, {}) as server:
        hc = heatclient.Client("1", endpoint=f"{server.url}/v1/demo", token=server.token)
        created = await asyncio.to_thread(hc.stacks.create, stack_name="up-yaql", template=template)
        stack_id = created["stack"]["id"]

        async def settled() -> Any:
            for _ in range(600):
                stack = await asyncio.to_thread(hc.stacks.get, stack_id)
                if stack.stack_status != "CREATE_IN_PROGRESS":
                    return stack
                await asyncio.sleep(0.1)
            raise AssertionError("the stack did not settle in 60 s")

        stack = await settled()
        assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
        outputs = {o["output_key"]: o["output_value"] for o in stack.outputs}
        assert outputs["cidrs"] == EXPECTED_OUTPUTS["cidrs"]
