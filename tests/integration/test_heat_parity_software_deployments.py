"""Heat parity (issue 20 item 2): software deployments, through Heat's own client.

Real: a Converge engine with its HTTP API on PostgreSQL (tests.support.convergence) and
python-heatclient. The test plays the server's agent through the same API an agent
uses (the server's metadata, the resource signal, PUT on the deployment): a deployment
waits for that signal and completes (or fails, with the stderr in its reason) from it;
a config update re-deploys; NO_SIGNAL completes at once. (The sandbox's own agent
is tested end to end in test_sandbox_agent.py.)
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from services.engine.core.model import StackId
from tests.support import heat_parity
from tests.support.engine_settings import engine_settings
from tests.support.heat_parity import HeatClients
from tests.support.openstack_cli import BIN
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

TOKENS = "t1=p1,t2=p2"


class Heat(HeatClients):
    async def call(self, method: str, path: str, *, token: str = "t1", body: Any = None) -> tuple[int, Any]:
        async with (
            aiohttp.ClientSession() as http,
            http.request(method, f"{self.base}{path}", json=body, headers={"X-Auth-Token": token}) as r,
        ):
            text = await r.text()
            return r.status, json.loads(text) if text else None

    async def converge_cli(self, *args: str) -> Any:
        """`converge ARGS -f json` as project p1: its JSON answer (it must succeed)."""
        argv = [str(BIN / "converge"), "--url", self.base, "--token", "t1", "--project", "p1", *args]
        done = await asyncio.to_thread(
            subprocess.run, argv, capture_output=True, text=True, timeout=90, check=False
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    async def metadata(self, server: str) -> list[dict[str, Any]]:
        """What the server's agent finds (heatclient's software_deployments.metadata)."""
        found = await self.run(self.hc.software_deployments.metadata, server)
        return list(found)

    async def waiting(self, server: str, count: int = 1) -> list[dict[str, Any]]:
        """The server's configs once `count` deployments wait for it."""

        async def ready() -> bool:
            items = await self.metadata(server)
            in_progress: int = sum(i["deployment_status"] == "IN_PROGRESS" for i in items)
            return in_progress >= count

        await eventually(ready, timeout=60)
        return await self.metadata(server)


@pytest.fixture
async def heat(database_url: str, tmp_path: Path) -> AsyncIterator[Heat]:
    async with heat_parity.serving(Heat, database_url, tmp_path, tokens=TOKENS) as running:
        yield running


def deployment_template(script: str = "echo hello", transport: str = "HEAT_SIGNAL") -> dict[str, Any]:
    return {
        "heat_template_version": "2018-08-31",
        "resources": {
            "config": {
                "type": "OS::Heat::SoftwareConfig",
                "properties": {
                    "group": "script",
                    "config": script,
                    "inputs": [{"name": "who", "default": "world"}],
                    "outputs": [{"name": "result"}],
                },
            },
            "deploy": {
                "type": "OS::Heat::SoftwareDeployment",
                "properties": {
                    "config": {"get_resource": "config"},
                    "server": "server-1",
                    "input_values": {"who": "alice"},
                    "signal_transport": transport,
                },
            },
        },
        "outputs": {
            "stdout": {"value": {"get_attr": ["deploy", "deploy_stdout"]}},
            "code": {"value": {"get_attr": ["deploy", "deploy_status_code"]}},
            "result": {"value": {"get_attr": ["deploy", "result"]}},
        },
    }


def outputs(stack: Any) -> dict[str, Any]:
    return {o["output_key"]: o["output_value"] for o in stack.outputs}


def inputs(item: dict[str, Any]) -> dict[str, Any]:
    return {i["name"]: i.get("value") for i in item["inputs"]}


async def create(heat: Heat, name: str, template: dict[str, Any]) -> str:
    made = await heat.run(heat.hc.stacks.create, stack_name=name, template=template)
    return str(made["stack"]["id"])


async def test_a_deployment_waits_for_its_servers_signal_and_completes_with_its_outputs(heat: Heat) -> None:
    stack_id = await create(heat, "web", deployment_template())
    [item] = await heat.waiting("server-1")
    assert item["config"] == "echo hello"
    assert item["group"] == "script"
    given = inputs(item)
    assert given["who"] == "alice"
    assert given["deploy_server_id"] == "server-1"
    assert given["deploy_action"] == "CREATE"
    assert given["deploy_resource_name"] == "deploy"
    assert given["deploy_stack_id"] == f"web/{stack_id}"
    assert given["deploy_signal_transport"] == "HEAT_SIGNAL"
    stack = await heat.run(heat.hc.stacks.get, stack_id)
    assert stack.stack_status == "CREATE_IN_PROGRESS", "the deployment waits for its server"

    signal = {"deploy_stdout": "hello alice\n", "deploy_stderr": "", "deploy_status_code": 0, "result": "42"}
    await heat.run(heat.hc.resources.signal, stack_id, "deploy", data=signal)
    stack = await heat.settled(stack_id)
    assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
    assert outputs(stack) == {"stdout": "hello alice\n", "code": 0, "result": "42"}
    shown = await heat.run(heat.hc.software_deployments.get, item["deployment_id"])
    assert (shown.status, shown.action, shown.server_id) == ("COMPLETE", "CREATE", "server-1")
    assert shown.output_values == signal
    assert shown.config_id == item["id"]
    listed = await heat.run(lambda: [d.id for d in heat.hc.software_deployments.list(server_id="server-1")])
    assert listed == [item["deployment_id"]]

    await heat.run(heat.hc.stacks.delete, stack_id)
    await heat.cv.settled(StackId(uuid.UUID(stack_id)), timeout=60)
    assert await heat.metadata("server-1") == [], "the deployment and its derived config went with the stack"


async def test_a_non_zero_status_code_fails_the_deployment_with_its_stderr(heat: Heat) -> None:
    stack_id = await create(heat, "broken", deployment_template("exit 3"))
    await heat.waiting("server-1")
    signal = {"deploy_stdout": "", "deploy_stderr": "no such package: nginx", "deploy_status_code": 3}
    await heat.run(heat.hc.resources.signal, stack_id, "deploy", data=signal)
    stack = await heat.settled(stack_id)
    assert stack.stack_status == "CREATE_FAILED"
    deploy = await heat.run(heat.hc.resources.get, stack_id, "deploy")
    assert deploy.resource_status == "FAILED" or deploy.resource_status == "CREATE_FAILED"
    assert "non-zero status code: 3" in deploy.resource_status_reason
    assert "no such package: nginx" in deploy.resource_status_reason


async def test_a_config_update_re_deploys_and_the_agent_may_answer_through_put(heat: Heat) -> None:
    stack_id = await create(heat, "web", deployment_template("echo one"))
    [first] = await heat.waiting("server-1")
    await heat.run(heat.hc.resources.signal, stack_id, "deploy", data={"deploy_status_code": 0})
    assert (await heat.settled(stack_id)).stack_status == "CREATE_COMPLETE"

    await heat.run(heat.hc.stacks.update, stack_id, template=deployment_template("echo two"))
    [second] = await heat.waiting("server-1")
    assert second["config"] == "echo two"
    assert second["deployment_id"] == first["deployment_id"], "the same deployment, re-deployed"
    assert second["id"] != first["id"], "a new derived config"
    assert inputs(second)["deploy_action"] == "UPDATE"
    await heat.run(
        heat.hc.software_deployments.update,
        second["deployment_id"],
        status="COMPLETE",
        output_values={"deploy_stdout": "two\n", "deploy_status_code": 0, "result": "2"},
    )
    stack = await heat.settled(stack_id)
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    assert outputs(stack)["stdout"] == "two\n"
    assert outputs(stack)["result"] == "2"
    left = [i["id"] for i in await heat.metadata("server-1")]
    assert left == [second["id"]], "the old derived config is gone"


async def test_no_signal_completes_at_once(heat: Heat) -> None:
    stack_id = await create(heat, "quick", deployment_template(transport="NO_SIGNAL"))
    stack = await heat.settled(stack_id)
    assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
    [item] = await heat.metadata("server-1")
    assert (item["deployment_status"], inputs(item)["deploy_signal_transport"]) == ("COMPLETE", "NO_SIGNAL")


async def test_the_deployments_api_creates_shows_updates_and_deletes_as_heat(heat: Heat) -> None:
    from heatclient import exc

    config = await heat.run(heat.hc.software_configs.create, name="c", group="script", config="true")
    made = await heat.run(
        heat.hc.software_deployments.create,
        config_id=config.id,
        server_id="server-9",
        input_values={"a": 1},
        action="CREATE",
        status="IN_PROGRESS",
        status_reason="Deploy data available",
    )
    assert (made.server_id, made.status, made.input_values) == ("server-9", "IN_PROGRESS", {"a": 1})
    [item] = await heat.metadata("server-9")
    assert (item["id"], item["deployment_id"]) == (config.id, made.id)
    done = await heat.run(
        heat.hc.software_deployments.update, made.id, status="FAILED", status_reason="it broke"
    )
    assert (done.status, done.status_reason) == ("FAILED", "it broke")
    status, answer = await heat.call("DELETE", f"/v1/p1/software_configs/{config.id}")
    assert status == 400, "a config a deployment runs is not deleted, as in Heat"
    assert "can not be deleted as it is referenced" in answer["error"]["message"]
    await heat.run(heat.hc.software_deployments.delete, made.id)
    await heat.run(heat.hc.software_configs.delete, config.id)
    with pytest.raises(exc.HTTPNotFound):
        await heat.run(heat.hc.software_deployments.get, made.id)
    status, answer = await heat.call(
        "POST", "/v1/p1/software_deployments", body={"config_id": "not-a-uuid", "server_id": "s"}
    )
    assert status == 400
    assert "config_id" in answer["error"]["message"], answer
    status, _ = await heat.call("GET", f"/v1/p2/software_deployments/{made.id}", token="t2")
    assert status == 404
    status, _ = await heat.call("GET", "/v1/p1/software_deployments/metadata/server-9", token="f" * 48)
    assert status == 401, "a token that is no server's agent token reads nothing"
    status, _ = await heat.call(
        "PUT", f"/v1/p1/software_deployments/{made.id}", token="f" * 48, body={"status": "COMPLETE"}
    )
    assert status == 401
    huge = {"status": "COMPLETE", "output_values": {"deploy_stdout": "x" * 70_000}}
    status, _ = await heat.call("PUT", f"/v1/p1/software_deployments/{made.id}", token="f" * 48, body=huge)
    assert status == 413, "an agent's outcome is bounded as a signal is"


async def test_the_openstack_cli_drives_software_deployments(heat: Heat) -> None:
    config = await heat.cli.json(
        "software", "config", "create", "greeter", "--group", "script", "--config-file", "/dev/null"
    )
    made = await heat.cli.json(
        "software", "deployment", "create", "greet", "--config", config["id"], "--server", "server-7",
        "--signal-transport", "NO_SIGNAL", "--input-value", "who=bob",
    )  # fmt: skip
    assert (made["server_id"], made["status"]) == ("server-7", "IN_PROGRESS")
    shown = await heat.cli.json("software", "deployment", "show", made["id"])
    assert shown["id"] == made["id"]
    listed = await heat.cli.json("software", "deployment", "list", "--server", "server-7")
    assert [d["id"] for d in listed] == [made["id"]]
    metadata = json.loads(await heat.cli.ok("software", "deployment", "metadata", "show", "server-7"))
    [item] = metadata
    assert inputs(item)["who"] == "bob"
    await heat.run(
        heat.hc.software_deployments.update,
        made["id"],
        status="COMPLETE",
        output_values={"deploy_stdout": "hi bob", "deploy_status_code": 0},
    )
    said = await heat.cli.ok("software", "deployment", "output", "show", made["id"], "deploy_stdout")
    assert "hi bob" in said

    mine = await heat.converge_cli("software", "deployment", "list", "--server", "server-7", "-f", "json")
    assert [(d["ID"], d["Status"]) for d in mine] == [(made["id"], "COMPLETE")]
    shown = await heat.converge_cli("software", "deployment", "show", made["id"], "-f", "json")
    assert shown["output_values"]["deploy_stdout"] == "hi bob"
    out = await heat.converge_cli(
        "software", "deployment", "output", "show", made["id"], "deploy_stdout", "-f", "json"
    )
    assert out == {"deploy_stdout": "hi bob"}
    now = await heat.metadata("server-7")
    assert await heat.converge_cli("software", "deployment", "metadata", "show", "server-7") == now
    await heat.cli.ok("software", "deployment", "delete", made["id"])
    assert await heat.cli.json("software", "deployment", "list") == []


async def test_a_structured_deployment_substitutes_inputs_and_unknown_transports_are_refused(
    heat: Heat,
) -> None:
    from heatclient import exc

    structured = {
        "heat_template_version": "2018-08-31",
        "resources": {
            "config": {
                "type": "OS::Heat::StructuredConfig",
                "properties": {"group": "ansible", "config": {"hosts": {"get_input": "hosts"}}},
            },
            "deploy": {
                "type": "OS::Heat::StructuredDeployment",
                "properties": {
                    "config": {"get_resource": "config"},
                    "server": "server-2",
                    "input_values": {"hosts": ["a", "b"]},
                    "signal_transport": "NO_SIGNAL",
                },
            },
        },
    }
    stack_id = await create(heat, "structured", structured)
    assert (await heat.settled(stack_id)).stack_status == "CREATE_COMPLETE"
    [item] = await heat.metadata("server-2")
    assert (item["group"], item["config"]) == ("ansible", {"hosts": ["a", "b"]})

    cfn = deployment_template()
    cfn["resources"]["deploy"]["properties"]["signal_transport"] = "CFN_SIGNAL"
    with pytest.raises(exc.HTTPBadRequest, match="signal_transport"):
        await create(heat, "cfn", cfn)


async def test_a_stack_delete_does_not_wait_for_a_silent_server_and_leaves_no_deployment(heat: Heat) -> None:
    stack_id = await create(heat, "silent", deployment_template())
    [item] = await heat.waiting("server-1")
    deploy = await heat.run(heat.hc.resources.get, stack_id, "deploy")
    assert deploy.physical_resource_id == item["deployment_id"], "the row owns its deployment at once"
    await heat.run(heat.hc.stacks.delete, stack_id)
    await heat.cv.settled(StackId(uuid.UUID(stack_id)), timeout=60)
    assert await heat.metadata("server-1") == []
    assert await heat.run(lambda: list(heat.hc.software_deployments.list())) == []
    status, _ = await heat.call("GET", f"/v1/p1/software_configs/{item['id']}")
    assert status == 404, "the derived config went with its deployment"
    late = {"deploy_status_code": 0}
    status, _ = await heat.call("PUT", f"/v1/p1/software_deployments/{item['deployment_id']}", body=late)
    assert status == 404


async def test_a_deployment_group_deploys_to_each_server_and_maps_their_outputs(heat: Heat) -> None:
    template = deployment_template()
    props = template["resources"].pop("deploy")["properties"]
    del props["server"]
    props["servers"] = {"web0": "server-a", "web1": "server-b", "db": "server-c"}
    template["resources"]["deploys"] = {"type": "OS::Heat::SoftwareDeploymentGroup", "properties": props}
    template["outputs"] = {
        "stdouts": {"value": {"get_attr": ["deploys", "deploy_stdouts"]}},
        "codes": {"value": {"get_attr": ["deploys", "deploy_status_codes"]}},
        "results": {"value": {"get_attr": ["deploys", "result"]}},
    }
    stack_id = await create(heat, "group", template)
    for name, server in props["servers"].items():
        [item] = await heat.waiting(server)
        assert inputs(item)["deploy_resource_name"] == name
        assert inputs(item)["who"] == "alice"
        outcome = {"deploy_stdout": f"on {server}", "deploy_status_code": 0, "result": name.upper()}
        await heat.run(
            heat.hc.software_deployments.update,
            item["deployment_id"],
            status="COMPLETE",
            output_values=outcome,
        )
    stack = await heat.settled(stack_id)
    assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
    assert outputs(stack) == {
        "stdouts": {"web0": "on server-a", "web1": "on server-b", "db": "on server-c"},
        "codes": {"web0": 0, "web1": 0, "db": 0},
        "results": {"web0": "WEB0", "web1": "WEB1", "db": "DB"},
    }

    del props["servers"]["db"]
    await heat.run(heat.hc.stacks.update, stack_id, template=template)
    stack = await heat.settled(stack_id)
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    assert outputs(stack)["stdouts"] == {"web0": "on server-a", "web1": "on server-b"}
    assert await heat.metadata("server-c") == [], "the removed server's deployment is deleted"


async def test_a_deployment_whose_server_never_signals_fails_once_it_waited_too_long(
    database_url: str, tmp_path: Path
) -> None:
    settings = engine_settings(stall_seconds=0.5, stall_check_seconds=0.2, deployment_wait_seconds=1.0)
    async with heat_parity.serving(Heat, database_url, tmp_path, tokens=TOKENS, settings=settings) as heat:
        stack_id = await create(heat, "silent", deployment_template())
        [item] = await heat.waiting("server-1")
        stack = await heat.settled(stack_id)
        assert stack.stack_status == "CREATE_FAILED"
        deploy = await heat.run(heat.hc.resources.get, stack_id, "deploy")
        assert "no signal from server server-1 within 1s" in deploy.resource_status_reason
        shown = await heat.run(heat.hc.software_deployments.get, item["deployment_id"])
        assert shown.status == "FAILED"


async def test_a_rollback_does_not_wait_for_the_deployment_its_failed_update_started(heat: Heat) -> None:
    first = deployment_template("echo one")
    made = await heat.run(heat.hc.stacks.create, stack_name="rolled", template=first, disable_rollback=False)
    stack_id = str(made["stack"]["id"])
    await heat.waiting("server-1")
    await heat.run(heat.hc.resources.signal, stack_id, "deploy", data={"deploy_status_code": 0})
    assert (await heat.settled(stack_id)).stack_status == "CREATE_COMPLETE"

    # The update re-deploys and also waits for a condition the test fails once the server
    # has been asked to run "echo two": the update fails while the deployment waits.
    broken = deployment_template("echo two")
    broken["resources"]["handle"] = {"type": "OS::Heat::WaitConditionHandle"}
    broken["resources"]["gate"] = {
        "type": "OS::Heat::WaitCondition",
        "properties": {"handle": {"get_resource": "handle"}, "timeout": 600},
    }
    await heat.run(heat.hc.stacks.update, stack_id, template=broken, disable_rollback=False)
    [waiting] = await heat.waiting("server-1")
    assert waiting["config"] == "echo two"
    await heat.run(heat.hc.resources.signal, stack_id, "handle", data={"status": "FAILURE", "reason": "no"})

    async def rolling_back() -> bool:  # the rollback took the deployment from the update's wait
        stack = await heat.run(heat.hc.stacks.get, stack_id)
        items = await heat.metadata("server-1")
        return stack.stack_status == "ROLLBACK_IN_PROGRESS" and [
            (i["config"], i["deployment_status"]) for i in items
        ] == [("echo one", "IN_PROGRESS")]

    await eventually(rolling_back, timeout=60)
    await heat.run(heat.hc.resources.signal, stack_id, "deploy", data={"deploy_stdout": "one again"})
    stack = await heat.settled(stack_id)
    assert stack.stack_status == "ROLLBACK_COMPLETE", stack.stack_status_reason
    assert outputs(stack)["stdout"] == "one again"
