"""Heat parity (issue 20 item 2): a deployment's pollable-URL transport (TEMP_URL_SIGNAL)
and the DELETE, SUSPEND and RESUME actions delivered to the server, through Heat's own client.

Real: a Converge engine with its HTTP API on PostgreSQL (tests.support.convergence),
python-heatclient, and plain HTTP for the agent's PUT to its signal URL. The test plays the
server's agent through the same API an agent uses (the server's metadata, the signal URL, the
resource signal): a TEMP_URL_SIGNAL deployment completes from a PUT of its outputs to the URL
in its `deploy_signal_id` input, which only that run's token opens; a deployment whose
`actions` name DELETE (SUSPEND, RESUME) holds the stack's delete (suspend, resume) until the
server answers, and one that does not is deleted at once.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from services.engine.core.model import ResourceId, StackId, cleanup
from services.engine.messages import CheckResource
from shared.protocol import ENGINE_QUEUE
from tests.integration.test_heat_parity_software_deployments import (
    TOKENS,
    Heat,
    create,
    deployment_template,
    inputs,
    outputs,
)
from tests.support import heat_parity
from tests.support.engine_settings import engine_settings
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


@pytest.fixture
async def heat(database_url: str, tmp_path: Path) -> AsyncIterator[Heat]:
    async with heat_parity.serving(Heat, database_url, tmp_path, tokens=TOKENS) as running:
        yield running


async def put(url: str, body: Any = None, *, data: bytes | None = None) -> int:
    """The agent's PUT to a signal URL: no X-Auth-Token, as heat-config sends it."""
    async with aiohttp.ClientSession() as http, http.put(url, json=body, data=data) as response:
        return response.status


def with_actions(template: dict[str, Any], *actions: str) -> dict[str, Any]:
    template["resources"]["deploy"]["properties"]["actions"] = list(actions)
    return template


async def waiting_for(heat: Heat, server: str, action: str) -> dict[str, Any]:
    """The server's config once a deployment waits for it to run `action`."""

    async def ready() -> bool:
        return any(
            i["deployment_status"] == "IN_PROGRESS" and inputs(i)["deploy_action"] == action
            for i in await heat.metadata(server)
        )

    await eventually(ready, timeout=60)
    [item] = [i for i in await heat.metadata(server) if inputs(i)["deploy_action"] == action]
    return item


async def stack_state(heat: Heat, stack_id: str) -> tuple[str, str]:
    await heat.cv.settled(StackId(uuid.UUID(stack_id)), timeout=60)
    return await heat.cv.state(uuid.UUID(stack_id))


async def test_a_temp_url_deployment_completes_from_a_put_of_its_outputs_to_its_signal_url(
    heat: Heat,
) -> None:
    stack_id = await create(heat, "web", deployment_template("echo one", transport="TEMP_URL_SIGNAL"))
    [first] = await heat.waiting("server-1")
    given = inputs(first)
    url = given["deploy_signal_id"]
    assert (given["deploy_signal_transport"], given["deploy_signal_verb"]) == ("TEMP_URL_SIGNAL", "PUT")
    assert url.startswith(f"{heat.base}/v1/p1/software_deployments/{first['deployment_id']}/signal/")

    assert await put(url.rsplit("/", 1)[0] + "/" + "A" * 43, {"deploy_status_code": 0}) == 401
    assert await put(url.replace("/v1/p1/", "/v1/p2/"), {"deploy_status_code": 0}) == 401, "own project only"
    too_big = b'{"deploy_stdout": "' + b"x" * (64 * 1024) + b'"}'
    assert await put(url, data=too_big) == 413, "a signal body is bounded (CONVERGE_MAX_SIGNAL_BYTES)"
    assert await put(url, ["not", "an", "object"]) == 400
    stack = await heat.run(heat.hc.stacks.get, stack_id)
    assert stack.stack_status == "CREATE_IN_PROGRESS", "no refused PUT completed the deployment"

    signal = {"deploy_stdout": "one\n", "deploy_stderr": "", "deploy_status_code": 0, "result": "1"}
    assert await put(url, signal) == 201
    stack = await heat.settled(stack_id)
    assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
    assert outputs(stack) == {"stdout": "one\n", "code": 0, "result": "1"}

    updated = deployment_template("echo two", transport="TEMP_URL_SIGNAL")
    await heat.run(heat.hc.stacks.update, stack_id, template=updated)
    second = await waiting_for(heat, "server-1", "UPDATE")
    assert inputs(second)["deploy_signal_id"] != url, "each delivered run has its own URL"
    assert await put(url, {"deploy_stdout": "stale"}) == 401, "the CREATE run's URL no longer opens"
    failed = {"deploy_stdout": "", "deploy_stderr": "two broke", "deploy_status_code": 2}
    assert await put(inputs(second)["deploy_signal_id"], failed) == 201
    stack = await heat.settled(stack_id)
    assert stack.stack_status == "UPDATE_FAILED"
    deploy = await heat.run(heat.hc.resources.get, stack_id, "deploy")
    assert "non-zero status code: 2" in deploy.resource_status_reason
    assert "two broke" in deploy.resource_status_reason


@pytest.mark.parametrize("transport", ["ZAQAR_SIGNAL", "CFN_SIGNAL"])
async def test_a_transport_converge_does_not_offer_is_refused_naming_the_property(
    heat: Heat, transport: str
) -> None:
    from heatclient import exc

    with pytest.raises(exc.HTTPBadRequest) as refused:
        await create(heat, "unsupported", deployment_template(transport=transport))
    assert "signal_transport" in str(refused.value)
    assert f"{transport} is not supported by Converge" in str(refused.value)


async def test_a_stack_delete_waits_for_the_server_to_run_the_deployments_delete_action(heat: Heat) -> None:
    template = with_actions(deployment_template(), "CREATE", "UPDATE", "DELETE")
    stack_id = await create(heat, "cleanup", template)
    created = await waiting_for(heat, "server-1", "CREATE")
    await heat.run(heat.hc.resources.signal, stack_id, "deploy", data={"deploy_status_code": 0})
    assert (await heat.settled(stack_id)).stack_status == "CREATE_COMPLETE"

    await heat.run(heat.hc.stacks.delete, stack_id)
    deleting = await waiting_for(heat, "server-1", "DELETE")
    assert deleting["deployment_id"] == created["deployment_id"]
    assert deleting["deployment_action"] == "DELETE"
    assert inputs(deleting)["deploy_resource_name"] == "deploy"
    assert await heat.cv.state(uuid.UUID(stack_id)) == ("DELETE", "IN_PROGRESS"), "waits for the server"
    await heat.run(heat.hc.resources.signal, stack_id, "deploy", data={"deploy_stdout": "cleaned"})
    assert await stack_state(heat, stack_id) == ("DELETE", "COMPLETE")
    assert await heat.metadata("server-1") == [], "the deployment went once the server answered"
    status, _ = await heat.call("GET", f"/v1/p1/software_configs/{deleting['id']}")
    assert status == 404, "and its derived config with it"


async def test_a_failed_delete_run_fails_the_stack_delete_and_deleting_again_removes_the_deployment(
    heat: Heat,
) -> None:
    template = with_actions(deployment_template(transport="TEMP_URL_SIGNAL"), "CREATE", "DELETE")
    stack_id = await create(heat, "stuck", template)
    created = await waiting_for(heat, "server-1", "CREATE")
    assert await put(inputs(created)["deploy_signal_id"], {"deploy_status_code": 0}) == 201
    assert (await heat.settled(stack_id)).stack_status == "CREATE_COMPLETE"

    await heat.run(heat.hc.stacks.delete, stack_id)
    deleting = await waiting_for(heat, "server-1", "DELETE")
    refusal = {"deploy_status_code": 1, "deploy_stderr": "cannot deregister"}
    assert await put(inputs(deleting)["deploy_signal_id"], refusal) == 201
    assert await stack_state(heat, stack_id) == ("DELETE", "FAILED")
    deploy = await heat.run(heat.hc.resources.get, stack_id, "deploy")
    assert deploy.resource_status == "DELETE_FAILED"
    assert "cannot deregister" in deploy.resource_status_reason

    await heat.run(heat.hc.stacks.delete, stack_id)
    assert await stack_state(heat, stack_id) == ("DELETE", "COMPLETE"), "a failed one can still be deleted"
    assert await heat.metadata("server-1") == []


async def test_without_delete_in_its_actions_or_with_no_signal_a_deployment_is_deleted_at_once(
    heat: Heat,
) -> None:
    quiet = with_actions(deployment_template(transport="NO_SIGNAL"), "CREATE", "DELETE")
    plain = deployment_template(transport="TEMP_URL_SIGNAL")
    plain["resources"]["deploy"]["properties"]["server"] = "server-2"
    ids = [await create(heat, "quiet", quiet), await create(heat, "plain", plain)]
    created = await waiting_for(heat, "server-2", "CREATE")
    assert await put(inputs(created)["deploy_signal_id"], {"deploy_status_code": 0}) == 201
    for stack_id in ids:
        assert (await heat.settled(stack_id)).stack_status == "CREATE_COMPLETE"
        await heat.run(heat.hc.stacks.delete, stack_id)
    for stack_id in ids:
        assert await stack_state(heat, stack_id) == ("DELETE", "COMPLETE"), "no server was asked"
    assert await heat.run(lambda: list(heat.hc.software_deployments.list())) == []


async def test_suspend_and_resume_are_delivered_to_the_server_when_the_actions_name_them(heat: Heat) -> None:
    template = with_actions(deployment_template(), "CREATE", "SUSPEND", "RESUME")
    stack_id = await create(heat, "pausable", template)
    await waiting_for(heat, "server-1", "CREATE")
    await heat.run(heat.hc.resources.signal, stack_id, "deploy", data={"deploy_status_code": 0})
    assert (await heat.settled(stack_id)).stack_status == "CREATE_COMPLETE"

    for action, stdout in (("SUSPEND", "paused"), ("RESUME", "running")):
        verb = heat.hc.actions.suspend if action == "SUSPEND" else heat.hc.actions.resume
        await heat.run(verb, stack_id)
        item = await waiting_for(heat, "server-1", action)
        assert item["deployment_action"] == action
        assert await heat.cv.state(uuid.UUID(stack_id)) == (action, "IN_PROGRESS"), "waits for the server"
        signal = {"deploy_stdout": stdout, "deploy_status_code": 0}
        await heat.run(heat.hc.resources.signal, stack_id, "deploy", data=signal)
        stack = await heat.settled(stack_id)
        assert stack.stack_status == f"{action}_COMPLETE", stack.stack_status_reason
        assert outputs(stack)["stdout"] == stdout


async def late_check(heat: Any, stack_id: str, name: str) -> CheckResource:
    """A check of `name`'s cleanup node in the stack's current traversal, sent afresh."""
    row = await heat.cv.pool.fetchrow(
        """SELECT s.current_traversal, r.resource_id FROM stacks s
           JOIN resources r ON r.stack_id = s.stack_id WHERE s.stack_id = $1 AND r.name = $2""",
        uuid.UUID(stack_id),
        name,
    )
    return CheckResource(
        stack_id=uuid.UUID(stack_id),
        traversal_id=row["current_traversal"],
        node=cleanup(ResourceId(row["resource_id"])),
        resource_id=row["resource_id"],
    )


async def test_a_delete_the_server_never_answers_fails_after_the_wait_and_deleting_again_removes_it(
    database_url: str, tmp_path: Path
) -> None:

    settings = engine_settings(stall_seconds=0.5, stall_check_seconds=0.2, deployment_wait_seconds=1.0)
    async with heat_parity.serving(Heat, database_url, tmp_path, tokens=TOKENS, settings=settings) as heat:
        template = with_actions(deployment_template(), "DELETE")  # its CREATE completes at once
        stack_id = await create(heat, "silent", template)
        assert (await heat.settled(stack_id)).stack_status == "CREATE_COMPLETE"
        await heat.run(heat.hc.stacks.delete, stack_id)
        action, status, reason = await heat.cv.settled(StackId(uuid.UUID(stack_id)), timeout=60)
        assert (action, status) == ("DELETE", "FAILED")
        assert "no signal from server server-1 within 1s" in reason
        # A check of the failed delete arriving now (as the stall sweep's copy once did) must
        # not go on with it: it once deleted the failed deployment, and the stack with it.
        late = await late_check(heat, stack_id, "deploy")
        await heat.cv.engine.bus.publish(ENGINE_QUEUE, late)
        handled = "SELECT 1 FROM inbox WHERE message_id = $1"
        await eventually(lambda: heat.cv.pool.fetchval(handled, late.id), timeout=30, every=0.05)
        assert await stack_state(heat, stack_id) == ("DELETE", "FAILED")
        await heat.run(heat.hc.stacks.delete, stack_id)
        assert await stack_state(heat, stack_id) == ("DELETE", "COMPLETE")
        assert await heat.run(lambda: list(heat.hc.software_deployments.list())) == []
