"""The sandbox's configuration agent, end to end: `converge up` creates a Sandbox::Server
and deploys a software config to it; the server's agent (services/sandbox/agent.py) polls
its deployment metadata through Converge's API with its own token, "runs" the script by
its `#sandbox:` lines and signals the result, which completes the deployment with its
outputs; a config update is re-deployed; a failing script fails the deployment with its
stderr; NO_SIGNAL completes without waiting for the agent; a deployment group is run
by the agents of its three servers; a TEMP_URL_SIGNAL deployment whose `actions` name
SUSPEND, RESUME and DELETE is run by the agent for each of them (a failing DELETE run fails
the stack delete; deleting again removes it). The first and the last test run
examples/configured-server.yaml and examples/deployment-lifecycle.yaml as
examples/README.md shows them.
Real: the `converge` executable (engine, worker, observer, in-process sandbox), PostgreSQL,
HTTP, python-heatclient."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.sandbox import RunningUp, start_up
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BROKEN = """#!/bin/sh
#sandbox: stderr apt-get: no such package: nginx
#sandbox: exit 100
"""


def template(script: str, transport: str = "HEAT_SIGNAL") -> dict[str, Any]:
    return {
        "heat_template_version": "2018-08-31",
        "resources": {
            "server": {"type": "Sandbox::Server", "properties": {"image": "cirros"}},
            "config": {
                "type": "OS::Heat::SoftwareConfig",
                "properties": {
                    "group": "script",
                    "config": script,
                    "inputs": [{"name": "who"}],
                    "outputs": [{"name": "greeting"}],
                },
            },
            "deploy": {
                "type": "OS::Heat::SoftwareDeployment",
                "properties": {
                    "config": {"get_resource": "config"},
                    "server": {"get_resource": "server"},
                    "input_values": {"who": "alice"},
                    "signal_transport": transport,
                },
            },
        },
        "outputs": {
            "stdout": {"value": {"get_attr": ["deploy", "deploy_stdout"]}},
            "stderr": {"value": {"get_attr": ["deploy", "deploy_stderr"]}},
            "code": {"value": {"get_attr": ["deploy", "deploy_status_code"]}},
            "greeting": {"value": {"get_attr": ["deploy", "greeting"]}},
        },
    }


@dataclass
class Up:
    running: RunningUp
    hc: Any  # heatclient, project demo

    async def run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def settled(self, stack_id: str, wanted: str) -> Any:
        async def done() -> bool:
            stack = await self.run(self.hc.stacks.get, stack_id)
            return not stack.stack_status.endswith("IN_PROGRESS")

        await eventually(done, timeout=90, every=0.2)
        stack = await self.run(self.hc.stacks.get, stack_id)
        assert stack.stack_status == wanted, stack.stack_status_reason
        return stack

    async def outputs(self, stack_id: str) -> dict[str, Any]:
        stack = await self.run(self.hc.stacks.get, stack_id)
        return {o["output_key"]: o["output_value"] for o in stack.outputs}

    async def create(self, name: str, body: dict[str, Any]) -> str:
        made = await self.run(self.hc.stacks.create, stack_name=name, template=body)
        return str(made["stack"]["id"])


@pytest.fixture
async def up(tmp_path: Path, database_url: str) -> AsyncIterator[Up]:
    from heatclient import client as heatclient

    running = await start_up(tmp_path, database_url, env={"CONVERGE_SANDBOX_AGENT_POLL_SECONDS": "0.2"})
    try:
        hc = heatclient.Client("1", endpoint=f"{running.base}/v1/demo", token=running.token)
        yield Up(running, hc)
    finally:
        await running.process.stop()


async def test_the_agent_deploys_the_example_config_to_a_sandbox_server_and_re_deploys_its_update(
    up: Up,
) -> None:
    example = yaml.safe_load((EXAMPLES / "configured-server.yaml").read_text())
    made = await up.run(up.hc.stacks.create, stack_name="conf", template=example)
    stack_id = str(made["stack"]["id"])
    await up.settled(stack_id, "CREATE_COMPLETE")
    assert await up.outputs(stack_id) == {
        "stdout": "hello world\n",
        "greeting": "hello world",
        "status_code": 0,
    }
    server = (await up.run(up.hc.resources.get, stack_id, "server")).physical_resource_id
    [deployment] = await up.run(lambda: list(up.hc.software_deployments.list(server_id=server)))
    assert (deployment.status, deployment.action) == ("COMPLETE", "CREATE")

    await up.run(up.hc.stacks.update, stack_id, template=example, parameters={"greeting": "welcome"})
    await up.settled(stack_id, "UPDATE_COMPLETE")
    assert (await up.outputs(stack_id))["stdout"] == "welcome world\n"
    again = await up.run(up.hc.software_deployments.get, deployment.id)
    assert (again.status, again.action) == ("COMPLETE", "UPDATE")
    assert again.config_id != deployment.config_id
    assert (await up.run(up.hc.resources.get, stack_id, "server")).physical_resource_id == server


async def test_a_failing_script_fails_its_deployment_and_no_signal_does_not_wait(up: Up) -> None:
    broken = await up.create("broken", template(BROKEN))
    quick = await up.create("quick", template(BROKEN, transport="NO_SIGNAL"))
    await up.settled(broken, "CREATE_FAILED")
    deploy = await up.run(up.hc.resources.get, broken, "deploy")
    assert "non-zero status code: 100" in deploy.resource_status_reason
    assert "apt-get: no such package: nginx" in deploy.resource_status_reason
    await up.settled(quick, "CREATE_COMPLETE")
    assert (await up.outputs(quick))["code"] is None, "nobody waited for the agent's outcome"


async def test_a_deployment_group_is_run_by_the_agents_of_three_servers(up: Up) -> None:
    script = (
        "#sandbox: stdout configured ${deploy_server_id}\n"
        "#sandbox: output greeting=hi ${deploy_resource_name}\n"
    )
    names = ("web0", "web1", "db")
    body = {
        "heat_template_version": "2018-08-31",
        "resources": {
            **{n: {"type": "Sandbox::Server", "properties": {"image": "cirros", "name": n}} for n in names},
            "config": {
                "type": "OS::Heat::SoftwareConfig",
                "properties": {"group": "script", "config": script, "outputs": [{"name": "greeting"}]},
            },
            "deploys": {
                "type": "OS::Heat::SoftwareDeploymentGroup",
                "properties": {
                    "config": {"get_resource": "config"},
                    "servers": {n: {"get_resource": n} for n in names},
                },
            },
        },
        "outputs": {
            "stdouts": {"value": {"get_attr": ["deploys", "deploy_stdouts"]}},
            "greetings": {"value": {"get_attr": ["deploys", "greeting"]}},
        },
    }
    stack_id = await up.create("tier", body)
    await up.settled(stack_id, "CREATE_COMPLETE")
    servers = {n: (await up.run(up.hc.resources.get, stack_id, n)).physical_resource_id for n in names}
    got = await up.outputs(stack_id)
    assert got["stdouts"] == {n: f"configured {servers[n]}\n" for n in names}
    assert got["greetings"] == {n: f"hi {n}" for n in names}


async def test_the_agent_runs_suspend_resume_and_delete_and_answers_through_its_signal_url(up: Up) -> None:
    example = yaml.safe_load((EXAMPLES / "deployment-lifecycle.yaml").read_text())
    made = await up.run(
        up.hc.stacks.create, stack_name="life", template=example, parameters={"refuse_delete": 3}
    )
    stack_id = str(made["stack"]["id"])
    await up.settled(stack_id, "CREATE_COMPLETE")
    server = (await up.run(up.hc.resources.get, stack_id, "server")).physical_resource_id
    assert await up.outputs(stack_id) == {"stdout": f"CREATE on {server}\n"}
    [deployment] = await up.run(lambda: list(up.hc.software_deployments.list(server_id=server)))
    config = await up.run(up.hc.software_configs.get, deployment.config_id)
    transport = {i["name"]: i.get("value") for i in config.inputs}["deploy_signal_transport"]
    assert transport == "TEMP_URL_SIGNAL"

    await up.run(up.hc.actions.suspend, stack_id)
    await up.settled(stack_id, "SUSPEND_COMPLETE")
    assert await up.outputs(stack_id) == {"stdout": f"SUSPEND on {server}\n"}
    await up.run(up.hc.actions.resume, stack_id)
    await up.settled(stack_id, "RESUME_COMPLETE")
    assert await up.outputs(stack_id) == {"stdout": f"RESUME on {server}\n"}

    await up.run(up.hc.stacks.delete, stack_id)
    await up.settled(stack_id, "DELETE_FAILED")
    deploy = await up.run(up.hc.resources.get, stack_id, "deploy")
    assert "non-zero status code: 3" in deploy.resource_status_reason
    assert "would not let this server go" in deploy.resource_status_reason
    await up.run(up.hc.stacks.delete, stack_id)

    async def gone() -> bool:
        from heatclient import exc

        try:
            await up.run(up.hc.stacks.get, stack_id)
        except exc.HTTPNotFound:
            return True
        return False

    await eventually(gone, timeout=90, every=0.2)
    assert await up.run(lambda: list(up.hc.software_deployments.list(server_id=server))) == []
