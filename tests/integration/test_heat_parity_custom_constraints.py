"""Heat parity (issue 19 item 1): `custom_constraint`. A hello_world-shaped template whose
parameters carry Heat's nova/glance constraints validates (listing each constraint as
Heat's validate does, with a warning that it is not checked) and creates with
OS::Nova::Server mapped to OS::Heat::None; a validator's refusal is a 400 at create and at
update that changes nothing; a typo is refused in Heat's words; a plugin's constraint
(the example plugin's, through `converge.constraints`) checks values.

Real: the engine's HTTP app over real HTTP, PostgreSQL, the engine, worker and observer
(in-process bus), python-heatclient unmodified and the real `openstack` CLI; the custom
constraints are loaded from the installed entry points as the engine's main loads them.
The cloud is a `World` of Test::Thing resources.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.heat_parity import HeatClients, serving

pytestmark = pytest.mark.integration


#: heat-templates' hot/hello_world.yaml, as written (plus a parameter group).
HELLO_WORLD = """\
heat_template_version: 2013-05-23
description: >
  Hello world HOT template that just defines a single server.
  Contains just base features to verify base HOT support.
parameter_groups:
  - label: Server
    description: Where the server boots from
    parameters: [key_name, flavor, image]
  - label: Secrets
    parameters: [admin_pass, db_port]
parameters:
  key_name:
    type: string
    description: Name of an existing key pair to use for the server
    constraints:
      - custom_constraint: nova.keypair
  flavor:
    type: string
    description: Flavor for the server to be created
    default: m1.small
    constraints:
      - custom_constraint: nova.flavor
  image:
    type: string
    description: Image ID or image name to use for the server
    constraints:
      - custom_constraint: glance.image
  admin_pass:
    type: string
    description: Admin password
    hidden: true
    constraints:
      - length: { min: 6, max: 8 }
        description: Password length must be between 6 and 8 characters
      - allowed_pattern: "[a-zA-Z0-9]+"
        description: Password must consist of characters and numbers only
      - allowed_pattern: "[A-Z]+[a-zA-Z0-9]*"
        description: Password must start with an uppercase character
  db_port:
    type: number
    description: Database port number
    default: 50000
    constraints:
      - range: { min: 40000, max: 60000 }
        description: Port number must be between 40000 and 60000
resources:
  server:
    type: OS::Nova::Server
    properties:
      key_name: { get_param: key_name }
      image: { get_param: image }
      flavor: { get_param: flavor }
      admin_pass: { get_param: admin_pass }
      user_data:
        str_replace:
          template: |
            #!/bin/bash
            echo db_port
          params:
            db_port: { get_param: db_port }
outputs:
  server_networks:
    description: The networks of the deployed server
    value: { get_attr: [server, networks] }
"""
ENVIRONMENT = "resource_registry:\n  OS::Nova::Server: OS::Heat::None\n"
NOVA = "Converge does not check values against the Compute service (nova)"
UNCHECKED = {
    "key_name": ("nova.keypair", NOVA),
    "flavor": ("nova.flavor", NOVA),
    "image": ("glance.image", "Converge does not check values against the Image service (glance)"),
}

ADDRESSED: dict[str, Any] = {
    "heat_template_version": "2018-08-31",
    "parameters": {
        "addr": {"type": "string", "constraints": [{"custom_constraint": "ip_addr"}]},
        "subnet": {
            "type": "string",
            "default": "10.0.0.0/24",
            "constraints": [{"custom_constraint": "net_cidr"}],
        },
    },
    "resources": {
        "thing": {
            "type": "Test::Thing",
            "properties": {
                "value": {"list_join": [" in ", [{"get_param": "addr"}, {"get_param": "subnet"}]]}
            },
        }
    },
}


class Heat(HeatClients):
    def file(self, name: str, text: str) -> str:
        path = self.home / name
        path.write_text(text)
        return str(path)


@pytest.fixture
async def heat(database_url: str, tmp_path: Path) -> AsyncIterator[Heat]:
    async with serving(Heat, database_url, tmp_path) as heat:
        yield heat


async def test_a_hello_world_template_validates_with_warnings_and_creates(heat: Heat) -> None:
    body = await heat.run(heat.hc.stacks.validate, template=HELLO_WORLD, environment=ENVIRONMENT)
    assert {n: p.get("CustomConstraint") for n, p in body["Parameters"].items()} == {
        "key_name": "nova.keypair",
        "flavor": "nova.flavor",
        "image": "glance.image",
        "admin_pass": None,
        "db_port": None,
    }
    assert [g["label"] for g in body["ParameterGroups"]] == ["Server", "Secrets"]
    assert body["Warnings"] == [
        f"parameters.{name}: custom constraint {constraint} is not checked ({why}); "
        "any value is accepted as given"
        for name, (constraint, why) in UNCHECKED.items()
    ]

    template = heat.file("hello_world.yaml", HELLO_WORLD)
    environment = heat.file("env.yaml", ENVIRONMENT)
    shown = await heat.cli.ok("orchestration", "template", "validate", "-t", template, "-e", environment)
    assert "CustomConstraint: nova.flavor" in shown

    output = await heat.cli.ok(
        "stack", "create", "hello", "-t", template, "-e", environment, "--wait",
        "--parameter", "key_name=heat_key", "--parameter", "image=cirros-0.6",
        "--parameter", "admin_pass=Secret1",
    )  # fmt: skip
    assert (
        "[hello]: CREATE_IN_PROGRESS  parameter 'image' was not checked against custom constraint" in output
    )
    stack_id = (await heat.run(heat.hc.stacks.get, "hello")).id
    stack = await heat.settled(stack_id)
    assert stack.stack_status == "CREATE_COMPLETE"
    assert stack.parameters["flavor"] == "m1.small"
    resource = await heat.run(heat.hc.resources.get, stack_id, "server")
    assert resource.resource_type == "OS::Heat::None"
    events = await heat.run(heat.hc.events.list, stack_id, resource_name="hello")
    reasons = [e.resource_status_reason for e in events]
    for name, (constraint, why) in UNCHECKED.items():
        assert f"parameter '{name}' was not checked against custom constraint {constraint}: {why}" in reasons


async def test_a_bad_ip_address_is_refused_at_create_and_at_update_and_changes_nothing(heat: Heat) -> None:
    from heatclient import exc

    with pytest.raises(exc.HTTPBadRequest) as refused:
        await heat.run(
            heat.hc.stacks.create, stack_name="net", template=ADDRESSED, parameters={"addr": "10.0.0.300"}
        )
    assert (
        "parameters.addr: Error validating value '10.0.0.300': Invalid IP address (custom_constraint ip_addr)"
        in str(refused.value)
    )
    assert [s.stack_name for s in await heat.run(lambda: list(heat.hc.stacks.list()))] == []

    created = await heat.run(
        heat.hc.stacks.create, stack_name="net", template=ADDRESSED, parameters={"addr": "10.0.0.5"}
    )
    stack_id = created["stack"]["id"]
    assert (await heat.settled(stack_id)).stack_status == "CREATE_COMPLETE"
    assert heat.values() == ["10.0.0.5 in 10.0.0.0/24"]

    with pytest.raises(exc.HTTPBadRequest) as refused:
        await heat.run(
            heat.hc.stacks.update,
            stack_id,
            template=ADDRESSED,
            parameters={"addr": "10.0.0.6", "subnet": "10.0.0.0"},
        )
    assert (
        "parameters.subnet: Error validating value '10.0.0.0': '10.0.0.0' isn't a recommended CIDR, "
        "'10.0.0.0/32' is the recommended value (custom_constraint net_cidr)"
    ) in str(refused.value)
    failed = await heat.cli.run("stack", "update", "net", "--existing", "--parameter", "addr=fe80::1%eth0")
    assert failed.code != 0
    assert (
        "Error validating value 'fe80::1%eth0': Invalid IP address (custom_constraint ip_addr)" in failed.err
    )

    stack = await heat.settled(stack_id)
    assert (stack.stack_status, stack.parameters["addr"], stack.parameters["subnet"]) == (
        "CREATE_COMPLETE",
        "10.0.0.5",
        "10.0.0.0/24",
    )
    assert heat.values() == ["10.0.0.5 in 10.0.0.0/24"]

    await heat.cli.ok("stack", "update", "net", "--existing", "--parameter", "addr=2001:db8::7", "--wait")
    assert (await heat.settled(stack_id)).stack_status == "UPDATE_COMPLETE"
    assert heat.values() == ["2001:db8::7 in 10.0.0.0/24"]


async def test_a_misspelt_constraint_is_refused_in_heats_words(heat: Heat) -> None:
    from heatclient import exc

    template = yaml.safe_load(HELLO_WORLD)
    template["parameters"]["flavor"]["constraints"] = [{"custom_constraint": "nova.flavour"}]
    params = {"key_name": "k", "image": "i", "admin_pass": "Secret1"}
    with pytest.raises(exc.HTTPBadRequest) as refused:
        await heat.run(
            heat.hc.stacks.create,
            stack_name="typo",
            template=template,
            environment=ENVIRONMENT,
            parameters=params,
        )
    assert (
        '"m1.small" does not validate nova.flavour (constraint not found); did you mean nova.flavor'
        in str(refused.value)
    )
    with pytest.raises(exc.HTTPBadRequest) as refused:
        await heat.run(heat.hc.stacks.validate, template=template, environment=ENVIRONMENT)
    assert (
        'parameters.flavor.constraints[0].custom_constraint: "nova.flavour" constraint is not supported'
        in str(refused.value)
    )
    assert [s.stack_name for s in await heat.run(lambda: list(heat.hc.stacks.list()))] == []


async def test_a_plugins_constraint_checks_values(heat: Heat) -> None:
    from heatclient import exc

    template = {
        "heat_template_version": "2018-08-31",
        "parameters": {
            "name": {"type": "string", "constraints": [{"custom_constraint": "example.thing_name"}]},
            "flavor": {
                "type": "string",
                "default": "m1.tiny",
                "constraints": [{"custom_constraint": "sandbox.flavor"}],
            },
        },
        "resources": {"thing": {"type": "Example::Thing", "properties": {"name": {"get_param": "name"}}}},
        "outputs": {"label": {"value": {"get_attr": ["thing", "label"]}}},
    }
    body = await heat.run(heat.hc.stacks.validate, template=template, parameters={"name": "big-box"})
    assert body["Parameters"]["name"]["CustomConstraint"] == "example.thing_name"
    assert "Warnings" not in body
    with pytest.raises(exc.HTTPBadRequest) as refused:
        await heat.run(heat.hc.stacks.validate, template=template, parameters={"name": "Big Box"})
    assert (
        "parameters.name: Error validating value 'Big Box': a thing name is lower-case words joined by '-', "
        "e.g. 'big-box' (custom_constraint example.thing_name)"
    ) in str(refused.value)
    with pytest.raises(exc.HTTPBadRequest) as refused:
        await heat.run(
            heat.hc.stacks.create,
            stack_name="plug",
            template=template,
            parameters={"name": "box", "flavor": "huge"},
        )
    assert "Error validating value 'huge': not a sandbox flavor" in str(refused.value)

    created = await heat.run(
        heat.hc.stacks.create, stack_name="plug", template=template, parameters={"name": "big-box"}
    )
    stack = await heat.settled(created["stack"]["id"])
    assert stack.stack_status == "CREATE_COMPLETE"
    assert json.loads(json.dumps(stack.outputs))[0]["output_value"] == "big-box (1)"


async def test_a_nested_stacks_parameters_are_checked_too(heat: Heat) -> None:
    inner = {
        "heat_template_version": "2018-08-31",
        "parameters": {
            "addr": {"type": "string", "constraints": [{"custom_constraint": "ip_addr"}]},
            "flavor": {
                "type": "string",
                "default": "m1.small",
                "constraints": [{"custom_constraint": "nova.flavor"}],
            },
        },
        "resources": {"thing": {"type": "Test::Thing", "properties": {"value": {"get_param": "addr"}}}},
    }
    files = {"inner.yaml": json.dumps(inner)}

    def outer(addr: str) -> dict[str, Any]:
        return {
            "heat_template_version": "2018-08-31",
            "resources": {"inner": {"type": "inner.yaml", "properties": {"addr": addr}}},
        }

    created = await heat.run(
        heat.hc.stacks.create, stack_name="outer", template=outer("10.1.1.1"), files=files
    )
    stack = await heat.settled(created["stack"]["id"])
    assert stack.stack_status == "CREATE_COMPLETE"
    assert heat.values() == ["10.1.1.1"]
    child_id = (await heat.run(heat.hc.resources.get, created["stack"]["id"], "inner")).physical_resource_id
    events = await heat.run(heat.hc.events.list, child_id)
    assert any(
        "was not checked against custom constraint nova.flavor" in e.resource_status_reason for e in events
    )

    bad = await heat.run(heat.hc.stacks.create, stack_name="outer-bad", template=outer("10.1.1"), files=files)
    stack = await heat.settled(bad["stack"]["id"])
    assert stack.stack_status == "CREATE_FAILED"
    assert "Error validating value '10.1.1': Invalid IP address (custom_constraint ip_addr)" in (
        stack.stack_status_reason
    )
    assert heat.values() == ["10.1.1.1"]
