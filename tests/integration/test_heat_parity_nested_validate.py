"""Heat parity (issue 19 item 9 and "Done when"): `validate` checks the child stacks of
template resources, `OS::Heat::Stack` inline templates, ResourceGroup `resource_def` and
AutoScalingGroup `resource`,
naming the path into the child (Heat's `resources.web<web.yaml>...` for a template
resource); `OS::Heat::Stack` `context` is refused; and templates in the shapes Heat users
write — a nested environment with registry patterns and hooks, a software-config bundle
with the OpenStack types mapped to `OS::Heat::None` — validate and create.

Real: the engine's HTTP app over real HTTP, PostgreSQL, the engine, worker and observer
(in-process bus), python-heatclient unmodified and the real `openstack` CLI reading the
template, environment and script files from disk as a user's would.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from services.engine.core.model import StackId
from tests.support.heat_parity import HeatClients, serving
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


class Heat(HeatClients):
    def write(self, name: str, content: dict[str, Any] | str) -> str:
        path = self.home / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else yaml.safe_dump(content, sort_keys=False))
        return str(path)

    async def refusal(self, template: dict[str, Any], **fields: Any) -> str:
        from heatclient import exc

        with pytest.raises(exc.HTTPBadRequest) as refused:
            await self.run(self.hc.stacks.validate, template=template, **fields)
        return str(refused.value)


@pytest.fixture
async def heat(database_url: str, tmp_path: Path) -> AsyncIterator[Heat]:
    async with serving(Heat, database_url, tmp_path) as heat:
        yield heat


CHILD: dict[str, Any] = {
    "heat_template_version": "2016-10-14",
    "parameters": {"size": {"type": "number", "constraints": [{"range": {"max": 10}}]}},
    "resources": {
        "ok": {"type": "OS::Heat::Value", "properties": {"value": {"get_param": "size"}}},
        "typo": {"type": "OS::Heat::RandomStrin"},
    },
}


def top(resource: dict[str, Any]) -> dict[str, Any]:
    return {"heat_template_version": "2016-10-14", "resources": {"web": resource}}


async def test_validate_checks_a_template_resources_child_and_names_the_path_into_it(heat: Heat) -> None:
    files = {"web.yaml": yaml.safe_dump(CHILD)}
    text = await heat.refusal(top({"type": "web.yaml", "properties": {"size": 3}}), files=files)
    assert (
        "resources.web<web.yaml>.resources.typo.type: unknown resource type 'OS::Heat::RandomStrin'" in text
    )
    assert "did you mean OS::Heat::RandomString?" in text

    # A value given to the child is checked against its parameter's constraints there.
    fixed = {**CHILD, "resources": {"ok": CHILD["resources"]["ok"]}}
    files = {"web.yaml": yaml.safe_dump(fixed)}
    text = await heat.refusal(top({"type": "web.yaml", "properties": {"size": 30}}), files=files)
    assert "resources.web<web.yaml>.parameters.size" in text
    ok = await heat.run(
        heat.hc.stacks.validate, template=top({"type": "web.yaml", "properties": {"size": 3}}), files=files
    )
    assert ok["Description"] == "No description"

    # Through the registry and a second level of nesting, with the CLI reading the files.
    inner = {"heat_template_version": "2016-10-14", "resources": {"deep": {"type": "My::Thing"}}}
    outer = {"heat_template_version": "2016-10-14", "resources": {"mid": {"type": "inner.yaml"}}}
    heat.write("inner.yaml", inner)
    heat.write("outer.yaml", outer)
    env = heat.write("env.yaml", {"resource_registry": {"My::Web": "outer.yaml"}})
    path = heat.write("top.yaml", top({"type": "My::Web"}))
    failed = await heat.cli.run("orchestration", "template", "validate", "-t", path, "-e", env)
    assert failed.code != 0
    # The CLI sends the files under their URLs (file:///...), which the path names as Heat's does.
    assert "resources.web<file://" in failed.err
    assert "outer.yaml>.resources.mid<file://" in failed.err
    assert "inner.yaml>.resources.deep.type" in failed.err
    assert "unknown resource type 'My::Thing'" in failed.err


async def test_validate_checks_inline_stack_templates_and_group_definitions(heat: Heat) -> None:
    # The template as text (a map would be evaluated in the parent, its get_param too).
    inline = yaml.safe_dump(CHILD)
    stack = {"type": "OS::Heat::Stack", "properties": {"template": inline, "parameters": {"size": 1}}}
    text = await heat.refusal(top(stack))
    assert "resources.web.properties.template.resources.typo.type: unknown resource type" in text

    member = {"type": "OS::Heat::Value", "properties": {"valeu": "%index%"}}
    group = {"type": "OS::Heat::ResourceGroup", "properties": {"count": 2, "resource_def": member}}
    text = await heat.refusal(top(group))
    assert (
        "resources.web.properties.resource_def.properties.valeu: unknown property for type OS::Heat::Value"
        in text
    )

    member = {"type": "member.yaml", "properties": {"size": "%index%"}}
    group = {"type": "OS::Heat::ResourceGroup", "properties": {"count": 2, "resource_def": member}}
    text = await heat.refusal(top(group), files={"member.yaml": yaml.safe_dump(CHILD)})
    assert "resources.web.properties.resource_def<member.yaml>.resources.typo.type" in text

    # Valid ones validate: the checks do not refuse what would create.
    member = {"type": "OS::Heat::Value", "properties": {"value": "%index%"}}
    group = {"type": "OS::Heat::ResourceGroup", "properties": {"count": 2, "resource_def": member}}
    assert "Parameters" in await heat.run(heat.hc.stacks.validate, template=top(group))


async def test_validate_checks_an_autoscaling_groups_resource_definition(heat: Heat) -> None:
    member = {"type": "OS::Heat::Value", "properties": {"valeu": 1}}
    group = {
        "type": "OS::Heat::AutoScalingGroup",
        "properties": {"min_size": 1, "max_size": 2, "resource": member},
    }
    text = await heat.refusal(top(group))
    assert (
        "resources.web.properties.resource.properties.valeu: unknown property for type OS::Heat::Value"
        in text
    )
    member = {"type": "OS::Heat::Valu"}
    group = {
        "type": "OS::Heat::AutoScalingGroup",
        "properties": {"min_size": 0, "max_size": 2, "resource": member},
    }
    assert "resources.web.properties.resource.type" in await heat.refusal(top(group))
    member = {"type": "OS::Heat::Value", "properties": {"value": 1}}
    group = {
        "type": "OS::Heat::AutoScalingGroup",
        "properties": {"min_size": 1, "max_size": 2, "resource": member},
    }
    assert "Parameters" in await heat.run(heat.hc.stacks.validate, template=top(group))


async def test_a_remote_stack_context_is_refused_with_a_clear_message(heat: Heat) -> None:
    """heat-templates' multi_region_hello_world.yaml: `context: {region_name: ...}`."""
    inner = {"heat_template_version": "2016-10-14", "resources": {}}
    stack = {
        "type": "OS::Heat::Stack",
        "properties": {"template": inner, "context": {"region_name": "RegionTwo"}},
    }
    text = await heat.refusal(top(stack))
    assert (
        "resources.web.properties.context: region_name: a stack in another region or cloud is not supported"
        in text
    )
    from heatclient import exc

    with pytest.raises(exc.HTTPBadRequest):
        await heat.run(heat.hc.stacks.create, stack_name="remote", template=top(stack))
    assert await heat.run(lambda: list(heat.hc.stacks.list())) == [], "nothing was created"
    local = {"type": "OS::Heat::Stack", "properties": {"template": inner, "context": {"region_name": None}}}
    assert "Parameters" in await heat.run(heat.hc.stacks.validate, template=top(local))


# -- "Done when": the shapes real Heat users write --------------------------------------------


SERVER = {
    "heat_template_version": "2016-10-14",
    "parameters": {"index": {"type": "string"}},
    "resources": {
        "server": {
            "type": "OS::Nova::Server",
            "properties": {"name": {"list_join": ["-", ["app", {"get_param": "index"}]]}},
        },
        "db_port": {"type": "OS::Neutron::Port", "properties": {"network": "private"}},
    },
    "outputs": {"name": {"value": {"get_param": "index"}}},
}


async def test_a_nested_environment_with_registry_patterns_and_hooks_validates_and_creates(
    heat: Heat,
) -> None:
    """The environment maps OpenStack types to OS::Heat::None (by name and by a
    `OS::Neutron::*` pattern to a pattern), a type to a template file, and sets hooks by
    pattern at the top and, in a nested section, on a member's child resource."""
    heat.write("server.yaml", SERVER)
    template = {
        "heat_template_version": "2016-10-14",
        "resources": {
            "web_front": {"type": "OS::Nova::Server", "properties": {"name": "front"}},
            "apps": {
                "type": "OS::Heat::ResourceGroup",
                "properties": {
                    "count": 2,
                    "resource_def": {"type": "My::App", "properties": {"index": "%index%"}},
                },
            },
        },
        "outputs": {"names": {"value": {"get_attr": ["apps", "name"]}}},
    }
    environment = {
        "resource_registry": {
            "OS::Nova::Server": "OS::Heat::None",
            "OS::Neutron::*": "Converge::Stub::*",
            "Converge::Stub::Port": "OS::Heat::None",
            "My::App": "server.yaml",
            "resources": {
                "web_*": {"hooks": "pre-create"},
                "apps": {"1": {"db_*": {"hooks": ["pre-create"]}}},
            },
        }
    }
    path = heat.write("stack.yaml", template)
    env = heat.write("env.yaml", environment)
    validated = await heat.cli.json("orchestration", "template", "validate", "-t", path, "-e", env)
    assert validated["Environment"]["resource_registry"]["resources"]["web_*"] == {"hooks": "pre-create"}

    created = await heat.cli.json("stack", "create", "shapes", "-t", path, "-e", env)
    stack_id = created["id"]

    async def paused() -> list[str]:
        polled = await heat.cli.json("stack", "hook", "poll", "--nested-depth", "2", "shapes")
        return sorted(h["Resource Name"] for h in polled)

    await eventually(lambda: _equal(paused(), ["db_port", "web_front"]), timeout=60, every=0.5)
    await heat.cli.ok("stack", "hook", "clear", "--pre-create", "shapes", "web_front")
    await heat.cli.ok("stack", "hook", "clear", "--pre-create", "shapes", "apps/1/db_port")
    await heat.cv.settled(StackId(uuid.UUID(stack_id)), timeout=60)
    stack = await heat.run(heat.hc.stacks.get, stack_id)
    assert stack.stack_status == "CREATE_COMPLETE"
    assert {o["output_key"]: o["output_value"] for o in stack.outputs} == {"names": ["0", "1"]}
    nested = await heat.run(heat.hc.resources.list, stack_id, nested_depth=2)
    assert sorted(r.resource_name for r in nested) == sorted(
        ["web_front", "apps", "0", "1", "server", "db_port", "server", "db_port"]
    )


BUNDLE = {
    "heat_template_version": "2016-10-14",
    "description": "A software-config bundle: a script config deployed to a server",
    "parameters": {
        "flavor": {
            "type": "string",
            "default": "m1.small",
            "constraints": [{"allowed_values": ["m1.small", "m1.large"]}],
        },
        "message": {"type": "string", "default": "hello"},
    },
    "parameter_groups": [
        {"label": "Server", "parameters": ["flavor"]},
        {"label": "Config", "parameters": ["message"]},
    ],
    "resources": {
        "config": {
            "type": "OS::Heat::SoftwareConfig",
            "properties": {
                "group": "script",
                "inputs": [{"name": "message"}],
                "outputs": [{"name": "result"}],
                "config": {"get_file": "scripts/configure.sh"},
            },
        },
        "boot_config": {
            "type": "OS::Heat::CloudConfig",
            "properties": {"cloud_config": {"package_update": True}},
        },
        "server": {
            "type": "OS::Nova::Server",
            "properties": {
                "flavor": {"get_param": "flavor"},
                "user_data_format": "SOFTWARE_CONFIG",
                "user_data": {"get_resource": "boot_config"},
            },
        },
        "deployment": {
            "type": "OS::Heat::SoftwareDeployment",
            "properties": {
                "config": {"get_resource": "config"},
                "server": {"get_resource": "server"},
                "input_values": {"message": {"get_param": "message"}},
                "signal_transport": "HEAT_SIGNAL",
            },
        },
    },
    "outputs": {
        "result": {"value": {"get_attr": ["deployment", "result"]}},
        "server": {"value": {"get_resource": "server"}},
    },
}


async def test_a_software_config_bundle_mapped_to_none_validates_and_creates(heat: Heat) -> None:
    path = heat.write("bundle.yaml", BUNDLE)
    heat.write("scripts/configure.sh", '#!/bin/sh\necho "$message" > ${heat_outputs_path}.result\n')
    environment = {
        "resource_registry": {
            "OS::Heat::SoftwareConfig": "OS::Heat::None",
            "OS::Heat::CloudConfig": "OS::Heat::None",
            "OS::Heat::SoftwareDeployment": "OS::Heat::None",
            "OS::Nova::Server": "OS::Heat::None",
        }
    }
    env = heat.write("bundle-env.yaml", environment)
    validated = await heat.cli.json("orchestration", "template", "validate", "-t", path, "-e", env)
    assert validated["Description"] == BUNDLE["description"]
    assert [g["label"] for g in validated["ParameterGroups"]] == ["Server", "Config"]

    await heat.cli.ok(
        "stack", "create", "bundle", "-t", path, "-e", env, "--parameter", "message=hi", "--wait"
    )
    shown = await heat.cli.json("stack", "show", "bundle")
    assert shown["stack_status"] == "CREATE_COMPLETE"
    resources = await heat.cli.json("stack", "resource", "list", "bundle")
    assert sorted((r["resource_name"], r["resource_status"]) for r in resources) == [
        ("boot_config", "CREATE_COMPLETE"),
        ("config", "CREATE_COMPLETE"),
        ("deployment", "CREATE_COMPLETE"),
        ("server", "CREATE_COMPLETE"),
    ]
    outputs = {o["output_key"]: o["output_value"] for o in shown["outputs"]}
    assert outputs["result"] is None, "OS::Heat::None's attributes are null"
    assert outputs["server"]


async def _equal(found: Any, wanted: list[str]) -> bool:
    return bool(await found == wanted)
