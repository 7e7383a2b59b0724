"""Heat parity (issue 20 item 1): software configs, through Heat's own clients.

Real: a Converge engine with its HTTP API on PostgreSQL (tests.support.convergence),
python-heatclient, the `openstack software config ...` commands and `converge
software config ...`, as processes. The config resource types
(OS::Heat::SoftwareConfig, StructuredConfig, CloudConfig, MultipartMime) store
their configs through the engine, readable through the same API; another
project's config is not found, exactly as an unknown id.
"""

from __future__ import annotations

import asyncio
import contextlib
import email
import json
import subprocess
import uuid
from collections.abc import AsyncIterator
from email.message import Message
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest
import yaml

from shared.settings import EngineSettings
from tests.support import heat_parity
from tests.support.engine_settings import engine_settings
from tests.support.heat_parity import HeatClients
from tests.support.openstack_cli import BIN

pytestmark = pytest.mark.integration

TOKENS = "t1=p1,t2=p2"
SCRIPT = '#!/bin/sh\necho "hello $name"\n'


class Heat(HeatClients):
    async def call(self, method: str, path: str, *, token: str = "t1", body: Any = None) -> tuple[int, Any]:
        async with (
            aiohttp.ClientSession() as http,
            http.request(method, f"{self.base}{path}", json=body, headers={"X-Auth-Token": token}) as r,
        ):
            text = await r.text()
            return r.status, json.loads(text) if text else None

    async def converge_cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        argv = [str(BIN / "converge"), "--url", self.base, "--token", "t1", "--project", "p1", *args]
        return await asyncio.to_thread(
            subprocess.run, argv, capture_output=True, text=True, timeout=90, check=False
        )


@contextlib.asynccontextmanager
async def serving(
    database_url: str, home: Path, settings: EngineSettings | None = None
) -> AsyncIterator[Heat]:
    async with heat_parity.serving(Heat, database_url, home, tokens=TOKENS, settings=settings) as heat:
        yield heat


@pytest.fixture
async def heat(database_url: str, tmp_path: Path) -> AsyncIterator[Heat]:
    async with serving(database_url, tmp_path) as running:
        yield running


INPUTS = [{"name": "name", "description": "who to greet", "default": "world"}]
OUTPUTS = [{"name": "result", "type": "String"}]


async def test_heatclient_creates_shows_lists_and_deletes_a_config(heat: Heat) -> None:
    from heatclient import exc

    made = await heat.run(
        heat.hc.software_configs.create,
        name="greeter",
        group="script",
        config=SCRIPT,
        inputs=INPUTS,
        outputs=OUTPUTS,
        options={"verbose": True},
    )
    assert (made.name, made.group, made.config, made.options) == (
        "greeter",
        "script",
        SCRIPT,
        {"verbose": True},
    )
    assert made.inputs == [
        {
            "name": "name",
            "description": "who to greet",
            "type": "String",
            "default": "world",
            "replace_on_change": False,
        }
    ]
    assert made.outputs == [{"name": "result", "description": None, "type": "String", "error_output": False}]
    shown = await heat.run(heat.hc.software_configs.get, made.id)
    assert (shown.id, shown.config, shown.inputs, shown.creation_time) == (
        made.id,
        SCRIPT,
        made.inputs,
        made.creation_time,
    )
    second = await heat.run(
        heat.hc.software_configs.create, name="second", group="Heat::Ungrouped", config=""
    )
    listed = await heat.run(lambda: [(c.id, c.name) for c in heat.hc.software_configs.list()])
    assert listed == [(made.id, "greeter"), (second.id, "second")]
    first_page = await heat.run(lambda: [c.id for c in heat.hc.software_configs.list(limit=1)])
    after = await heat.run(lambda: [c.id for c in heat.hc.software_configs.list(marker=made.id)])
    assert (first_page, after) == ([made.id], [second.id])

    await heat.run(heat.hc.software_configs.delete, made.id)
    with pytest.raises(exc.HTTPNotFound):
        await heat.run(heat.hc.software_configs.get, made.id)
    with pytest.raises(exc.HTTPNotFound):
        await heat.run(heat.hc.software_configs.delete, made.id)
    listed = await heat.run(lambda: [c.id for c in heat.hc.software_configs.list()])
    assert listed == [second.id]


async def test_the_openstack_cli_and_converge_cli_drive_software_configs(heat: Heat) -> None:
    script = heat.home / "greet.sh"
    script.write_text(SCRIPT)
    definition = heat.home / "greet-def.yaml"
    definition.write_text(yaml.safe_dump({"inputs": INPUTS, "outputs": OUTPUTS, "options": {"a": 1}}))
    created = await heat.cli.json(
        "software", "config", "create", "os-made", "--config-file", str(script),
        "--definition-file", str(definition), "--group", "script",
    )  # fmt: skip
    assert (created["name"], created["group"], created["config"]) == ("os-made", "script", SCRIPT)
    shown = await heat.cli.json("software", "config", "show", created["id"])
    assert shown["inputs"][0]["name"] == "name"
    assert shown["options"] == {"a": 1}
    only = await heat.cli.ok("software", "config", "show", created["id"], "--config-only")
    assert only.strip() == SCRIPT.strip()

    mine = await heat.converge_cli(
        "software",
        "config",
        "create",
        "cv-made",
        "--config-file",
        str(script),
        "--group",
        "script",
        "-f",
        "json",
    )
    assert mine.returncode == 0, mine.stderr
    cv_made = json.loads(mine.stdout)
    assert (cv_made["name"], cv_made["config"]) == ("cv-made", SCRIPT)
    listed = await heat.cli.json("software", "config", "list")
    assert [(c["id"], c["name"]) for c in listed] == [(created["id"], "os-made"), (cv_made["id"], "cv-made")]
    cv_listed = await heat.converge_cli("software", "config", "list", "-f", "json")
    assert [c["ID"] for c in json.loads(cv_listed.stdout)] == [created["id"], cv_made["id"]]
    cv_shown = await heat.converge_cli("software", "config", "show", created["id"], "--config-only")
    assert cv_shown.stdout.strip() == SCRIPT.strip()

    await heat.cli.ok("software", "config", "delete", created["id"])
    deleted = await heat.converge_cli("software", "config", "delete", cv_made["id"])
    assert deleted.returncode == 0, deleted.stderr
    assert await heat.cli.json("software", "config", "list") == []
    missing = await heat.converge_cli("software", "config", "show", cv_made["id"])
    assert missing.returncode != 0
    assert "not found" in missing.stderr.lower(), missing.stderr
    refused = await heat.cli.run("software", "config", "show", created["id"])
    assert refused.code == 1
    assert "not found" in refused.err.lower(), refused.err


async def test_bad_configs_are_refused_naming_what_is_wrong_and_nothing_is_stored(heat: Heat) -> None:
    for body, said in (
        ({"group": "script", "config": "x"}, "name"),
        ({"name": "n", "inputs": [{"description": "no name"}]}, "inputs.0.name"),
        ({"name": "n", "outputs": [{"name": "o", "type": "Float"}]}, "outputs.0.type"),
        ({"name": "n", "config": 5}, "config"),
        (["not", "an", "object"], "object"),
    ):
        status, answer = await heat.call("POST", "/v1/p1/software_configs", body=body)
        assert status == 400, (body, status, answer)
        assert said in answer["error"]["message"], (body, answer)
    for bad in ("not-a-uuid", str(uuid.uuid4())):
        assert (await heat.call("GET", f"/v1/p1/software_configs/{bad}"))[0] == 404
        assert (await heat.call("DELETE", f"/v1/p1/software_configs/{bad}"))[0] == 404
    status, answer = await heat.call("GET", f"/v1/p1/software_configs?marker={uuid.uuid4()}")
    assert status == 400
    assert "marker" in answer["error"]["message"], answer
    assert (await heat.call("GET", "/v1/p1/software_configs"))[1] == {"software_configs": []}


async def test_another_projects_config_is_not_found_exactly_like_an_unknown_one(heat: Heat) -> None:
    status, made = await heat.call(
        "POST", "/v1/p2/software_configs", token="t2", body={"name": "p2's", "config": "secret"}
    )
    assert status == 200, made
    theirs, unknown = made["software_config"]["id"], str(uuid.uuid4())

    async def answers(config_id: str) -> list[tuple[int, Any]]:
        got = []
        for method in ("GET", "DELETE"):
            status, body = await heat.call(method, f"/v1/p1/software_configs/{config_id}")
            got.append((status, json.dumps(body).replace(config_id, "<id>")))
        status, body = await heat.call("GET", f"/v1/p1/software_configs?marker={config_id}")
        got.append((status, json.dumps(body).replace(config_id, "<id>")))
        for method in ("GET", "DELETE"):  # alpha's token on beta's URL
            status, _ = await heat.call(method, f"/v1/p2/software_configs/{config_id}")
            got.append((status, ""))
        return got

    foreign = await answers(theirs)
    assert foreign == await answers(unknown)
    assert foreign[0][0] == 404
    assert (await heat.call("GET", "/v1/p1/software_configs"))[1] == {"software_configs": []}
    status, still = await heat.call("GET", f"/v1/p2/software_configs/{theirs}", token="t2")
    assert (status, still["software_config"]["config"]) == (200, "secret")


ALL_FOUR = {
    "heat_template_version": "2018-08-31",
    "parameters": {"greeting": {"type": "string", "default": "hello"}},
    "resources": {
        "script": {
            "type": "OS::Heat::SoftwareConfig",
            "properties": {
                "group": "script",
                "config": {
                    "str_replace": {"template": "echo $g", "params": {"$g": {"get_param": "greeting"}}}
                },
                "inputs": [{"name": "who"}],
                "outputs": [{"name": "said", "error_output": False}],
                "options": {"debug": True},
            },
        },
        "structured": {
            "type": "OS::Heat::StructuredConfig",
            "properties": {"group": "ansible", "config": {"tasks": [{"debug": {"msg": "hi"}}]}},
        },
        "cloud": {
            "type": "OS::Heat::CloudConfig",
            "properties": {"cloud_config": {"package_update": True, "packages": ["nginx"]}},
        },
        "mime": {
            "type": "OS::Heat::MultipartMime",
            "properties": {
                "parts": [
                    {"config": {"get_resource": "cloud"}},
                    {"config": {"get_resource": "script"}, "filename": "run.sh", "subtype": "x-shellscript"},
                    {"config": "inline text"},
                ]
            },
        },
    },
    "outputs": {
        "script_config": {"value": {"get_attr": ["script", "config"]}},
        "structured_config": {"value": {"get_attr": ["structured", "config"]}},
        "cloud_config": {"value": {"get_attr": ["cloud", "config"]}},
        "mime_config": {"value": {"get_attr": ["mime", "config"]}},
        "ids": {"value": [{"get_resource": n} for n in ("script", "structured", "cloud", "mime")]},
    },
}


async def test_a_template_with_all_four_config_types_stores_configs_readable_through_the_api(
    heat: Heat,
) -> None:
    await heat.cli.ok("stack", "create", "configs", "-t", _write(heat, "all.yaml", ALL_FOUR), "--wait")
    shown = await heat.cli.json("stack", "show", "configs")
    assert shown["stack_status"] == "CREATE_COMPLETE", shown["stack_status_reason"]
    outputs = {o["output_key"]: o["output_value"] for o in shown["outputs"]}
    assert outputs["script_config"] == "echo hello"
    assert outputs["structured_config"] == {"tasks": [{"debug": {"msg": "hi"}}]}
    assert outputs["cloud_config"] == "#cloud-config\npackage_update: true\npackages:\n- nginx\n"
    ids = outputs["ids"]
    assert len({uuid.UUID(i) for i in ids}) == 4, "each resource's id is its config's id"

    configs = {}
    for name, config_id in zip(("script", "structured", "cloud", "mime"), ids, strict=True):
        configs[name] = (await heat.run(heat.hc.software_configs.get, config_id)).to_dict()
    assert (configs["script"]["group"], configs["script"]["config"]) == ("script", "echo hello")
    assert configs["script"]["inputs"][0] == {
        "name": "who", "description": None, "type": "String", "default": None, "replace_on_change": False,
    }  # fmt: skip
    assert configs["script"]["options"] == {"debug": True}
    assert (configs["structured"]["group"], configs["structured"]["config"]) == (
        "ansible",
        outputs["structured_config"],
    )
    assert (configs["cloud"]["group"], configs["cloud"]["config"]) == (
        "Heat::Ungrouped",
        outputs["cloud_config"],
    )
    assert configs["mime"]["config"] == outputs["mime_config"]
    message = email.message_from_string(outputs["mime_config"])
    parts = [
        (p.get_content_type(), p.get_filename(), p.get_payload())
        for p in cast("list[Message]", message.get_payload())
    ]
    assert parts == [
        ("text/plain", None, outputs["cloud_config"]),
        ("text/x-shellscript", "run.sh", "echo hello"),
        ("text/plain", None, "inline text"),
    ]
    resource = await heat.cli.json("stack", "resource", "show", "configs", "script")
    assert resource["physical_resource_id"] == ids[0]

    await heat.cli.ok("stack", "update", "configs", "-t", _write(heat, "all.yaml", ALL_FOUR),
                      "--parameter", "greeting=bye", "--wait")  # fmt: skip
    updated = {
        o["output_key"]: o["output_value"]
        for o in (await heat.cli.json("stack", "show", "configs"))["outputs"]
    }
    assert updated["script_config"] == "echo bye"
    assert updated["ids"][0] != ids[0], "a changed config is a new config"
    assert updated["ids"][1:3] == ids[1:3]
    assert updated["ids"][3] != ids[3], "the message names the new script"
    from heatclient import exc

    with pytest.raises(exc.HTTPNotFound):
        await heat.run(heat.hc.software_configs.get, ids[0])

    await heat.cli.ok("stack", "delete", "configs", "--yes", "--wait")
    assert await heat.run(lambda: list(heat.hc.software_configs.list())) == []


async def test_a_config_over_the_size_setting_is_refused_by_the_api_and_fails_its_resource(
    database_url: str, tmp_path: Path
) -> None:
    async with serving(database_url, tmp_path, engine_settings(max_software_config_bytes=2048)) as heat:
        await _over_the_limit(heat)


async def _over_the_limit(heat: Heat) -> None:
    status, answer = await heat.call(
        "POST", "/v1/p1/software_configs", body={"name": "big", "config": "x" * 2049}
    )
    assert status == 413, answer
    fits = await heat.call("POST", "/v1/p1/software_configs", body={"name": "fits", "config": "x" * 2048})
    assert fits[0] == 200, fits
    await heat.run(heat.hc.software_configs.delete, fits[1]["software_config"]["id"])
    big = {
        "heat_template_version": "2018-08-31",
        "resources": {"huge": {"type": "OS::Heat::SoftwareConfig", "properties": {"config": "x" * 2049}}},
    }
    created = await heat.cli.run("stack", "create", "big", "-t", _write(heat, "big.yaml", big), "--wait")
    assert created.code == 1, created
    shown = await heat.cli.json("stack", "show", "big")
    assert shown["stack_status"] == "CREATE_FAILED"
    assert "at most 2048" in shown["stack_status_reason"], shown["stack_status_reason"]
    assert await heat.run(lambda: list(heat.hc.software_configs.list())) == []


def _write(heat: Heat, name: str, content: dict[str, Any]) -> str:
    path = heat.home / name
    path.write_text(yaml.safe_dump(content, sort_keys=False))
    return str(path)


ONE = {
    "heat_template_version": "2018-08-31",
    "resources": {"cfg": {"type": "OS::Heat::SoftwareConfig", "properties": {"config": "echo one"}}},
    "outputs": {"id": {"value": {"get_resource": "cfg"}}},
}


async def test_a_stack_check_finds_a_config_deleted_behind_its_back_and_an_update_makes_it_again(
    heat: Heat,
) -> None:
    path = _write(heat, "one.yaml", ONE)
    await heat.cli.ok("stack", "create", "one", "-t", path, "--wait")
    first = (await heat.cli.json("stack", "resource", "show", "one", "cfg"))["physical_resource_id"]
    await heat.cli.ok("stack", "check", "one")
    assert await _settled(heat, "one") == "CHECK_COMPLETE"

    await heat.run(heat.hc.software_configs.delete, first)
    await heat.cli.run("stack", "check", "one")
    assert await _settled(heat, "one") == "CHECK_FAILED"
    resource = await heat.cli.json("stack", "resource", "show", "one", "cfg")
    assert "no longer exists" in resource["resource_status_reason"], resource

    await heat.cli.ok("stack", "update", "one", "--existing", "--wait")
    again = (await heat.cli.json("stack", "resource", "show", "one", "cfg"))["physical_resource_id"]
    assert again != first
    assert (await heat.run(heat.hc.software_configs.get, again)).config == "echo one"


async def _settled(heat: Heat, stack: str) -> str:
    for _ in range(600):
        status = str((await heat.run(heat.hc.stacks.get, stack)).stack_status)
        if not status.endswith("IN_PROGRESS"):
            return status
        await asyncio.sleep(0.2)
    raise AssertionError(f"{stack} still in progress")
