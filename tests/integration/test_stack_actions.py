"""Stack actions through Heat's API: check, suspend, resume, abandon and adopt.

Real: the engine's HTTP app over real HTTP, PostgreSQL, the engine, worker
and observer (in-process bus); python-heatclient unmodified drives it. The
world is a `World` of Test::Thing resources, so each test can see what
really happened to them (and change them behind Converge's back).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from services.engine.core.model import StackId
from tests.support.api import call, wait_for
from tests.support.convergence import Converge, converge
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

TOKENS = "t1=p1,t2=p2"
# db <- app <- web: `web` requires `app`, which requires `db`.
TEMPLATE: dict[str, Any] = {
    "heat_template_version": "2016-10-14",
    "resources": {
        "db": {"type": "Test::Thing", "properties": {"value": "d"}},
        "app": {"type": "Test::Thing", "properties": {"value": "a", "ref": {"get_resource": "db"}}},
        "web": {"type": "Test::Thing", "properties": {"value": "w", "ref": {"get_attr": ["app", "id"]}}},
    },
    "outputs": {"web_id": {"value": {"get_attr": ["web", "id"]}}},
}


@pytest.fixture
async def api(database_url: str) -> AsyncIterator[tuple[Converge, str, Any]]:
    from heatclient import client as heat

    async with converge(database_url, seed=0, duplicate_rate=0.0) as cv, cv.http(TOKENS) as base:
        yield cv, base, heat.Client("1", endpoint=f"{base}/v1/p1", token="t1")


async def created(hc: Any, name: str = "three") -> str:
    def run() -> str:
        stack_id: str = hc.stacks.create(stack_name=name, template=TEMPLATE)["stack"]["id"]
        wait_for(hc, stack_id, "CREATE_COMPLETE")
        return stack_id

    return await asyncio.to_thread(run)


async def action(hc: Any, stack_id: str, name: str, wanted: str) -> Any:
    """Run a stack action through heatclient's manager and wait for `wanted`; the stack."""

    def run() -> Any:
        getattr(hc.actions, name)(stack_id)
        wait_for(hc, stack_id, wanted, failed_ok=True)
        return hc.stacks.get(stack_id)

    return await asyncio.to_thread(run)


async def test_check_passes_while_every_resource_exists_and_names_the_one_that_is_gone(
    api: tuple[Converge, str, Any],
) -> None:
    cv, _, hc = api
    stack_id = await created(hc)
    stack = await action(hc, stack_id, "check", "CHECK_COMPLETE")
    assert stack.stack_status_reason == "Stack CHECK completed successfully"
    statuses = await asyncio.to_thread(
        lambda: {r.resource_name: r.resource_status for r in hc.resources.list(stack_id)}
    )
    assert statuses == {"db": "CHECK_COMPLETE", "app": "CHECK_COMPLETE", "web": "CHECK_COMPLETE"}

    (app,) = cv.world.by_name()["app"]
    del cv.world.live[app.physical_id]  # deleted behind Converge's back
    stack = await action(hc, stack_id, "check", "CHECK_FAILED")
    assert "no longer exists" in stack.stack_status_reason
    app_row = await asyncio.to_thread(hc.resources.get, stack_id, "app")
    assert app_row.resource_status == "CHECK_FAILED"
    assert cv.world.created == 3  # a check changes nothing in the world


async def test_suspend_pauses_dependents_first_and_resume_restarts_dependencies_first(
    api: tuple[Converge, str, Any],
) -> None:
    cv, base, hc = api
    stack_id = await created(hc)
    status, body, _ = await call(
        "POST", f"{base}/v1/p1/stacks/three/{stack_id}/actions", "t1", {"resume": None}
    )
    assert status == 409, body
    assert "not suspended" in body["error"]["message"]

    await action(hc, stack_id, "suspend", "SUSPEND_COMPLETE")
    assert cv.world.pauses == [("suspend", "web"), ("suspend", "app"), ("suspend", "db")]
    assert cv.world.suspended == set(cv.world.live)
    await action(hc, stack_id, "resume", "RESUME_COMPLETE")
    assert cv.world.pauses[3:] == [("resume", "db"), ("resume", "app"), ("resume", "web")]
    assert cv.world.suspended == set()

    outputs = await asyncio.to_thread(hc.stacks.output_show, stack_id, "web_id")
    (web,) = cv.world.by_name()["web"]
    assert outputs["output"]["output_value"] == web.physical_id  # attributes survive suspend and resume


async def test_a_stack_action_is_refused_while_an_operation_runs(api: tuple[Converge, str, Any]) -> None:
    cv, base, _ = api
    stack_id = await cv.create("busy", TEMPLATE)
    url = f"{base}/v1/p1/stacks/busy/{stack_id}/actions"
    status, body, _ = await call("POST", url, "t1", {"suspend": None})
    # The create may already be over on a fast machine; then the suspend is accepted.
    if status == 409:
        assert "wait for it to finish or cancel it" in body["error"]["message"]
    else:
        assert status == 200, body
    status, body, _ = await call("POST", url, "t1", {"hibernate": None})
    assert status == 400
    assert "hibernate" in body["error"]["message"]


async def test_abandon_leaves_the_resources_and_adopt_takes_them_over_without_creating(
    api: tuple[Converge, str, Any],
) -> None:
    cv, base, hc = api
    stack_id = await created(hc, "old")
    before = {name: reals[0].physical_id for name, reals in cv.world.by_name().items()}

    data = await asyncio.to_thread(hc.stacks.abandon, stack_id)
    assert {n: r["resource_id"] for n, r in data["resources"].items()} == before
    assert data["template"]["resources"]["web"]["type"] == "Test::Thing"
    status, _, _ = await call("GET", f"{base}/v1/p1/stacks/old/{stack_id}", "t1")
    assert status == 404
    assert set(cv.world.live) == set(before.values())  # nothing deleted

    def adopt() -> tuple[Any, list[Any]]:
        new_id = hc.stacks.create(stack_name="new", adopt_stack_data=json.dumps(data))["stack"]["id"]
        wait_for(hc, new_id, "ADOPT_COMPLETE")
        return hc.stacks.get(new_id), hc.resources.list(new_id)

    stack, resources = await asyncio.to_thread(adopt)
    assert {r.resource_name: r.physical_resource_id for r in resources} == before
    assert {r.resource_status for r in resources} == {"ADOPT_COMPLETE"}
    assert cv.world.created == 3  # taken over, not created again

    changed = {**TEMPLATE, "resources": {**TEMPLATE["resources"]}}
    changed["resources"]["db"] = {"type": "Test::Thing", "properties": {"value": "d2"}}
    await asyncio.to_thread(hc.stacks.update, stack.id, template=changed)
    await asyncio.to_thread(wait_for, hc, stack.id, "UPDATE_COMPLETE")
    assert cv.world.live[before["db"]].properties["value"] == "d2"  # updated in place, same resource
    await asyncio.to_thread(hc.stacks.delete, stack.id)
    await asyncio.to_thread(wait_for, hc, stack.id, "DELETE_COMPLETE")
    assert cv.world.live == {}


async def test_adopt_data_naming_a_resource_the_template_lacks_is_refused(
    api: tuple[Converge, str, Any],
) -> None:
    _, base, _ = api
    data = {"template": TEMPLATE, "resources": {"ghost": {"resource_id": "thing-9", "type": "Test::Thing"}}}
    status, body, _ = await call(
        "POST", f"{base}/v1/p1/stacks", "t1", {"stack_name": "x", "adopt_stack_data": json.dumps(data)}
    )
    assert status == 400, body
    assert "ghost" in body["error"]["message"]
    status, body, _ = await call("GET", f"{base}/v1/p1/stacks", "t1")
    assert body["stacks"] == []


async def test_resource_list_accepts_nested_depth_and_refuses_a_bad_one(
    api: tuple[Converge, str, Any],
) -> None:
    _, base, hc = api
    stack_id = await created(hc)
    url = f"{base}/v1/p1/stacks/three/{stack_id}/resources"
    status, body, _ = await call("GET", f"{url}?nested_depth=2", "t1")
    assert status == 200
    assert sorted(r["resource_name"] for r in body["resources"]) == ["app", "db", "web"]
    status, body, _ = await call("GET", f"{url}?nested_depth=deep", "t1")
    assert status == 400
    assert "nested_depth" in body["error"]["message"]


async def test_heatclient_cancel_update_rolls_an_update_in_progress_back(
    api: tuple[Converge, str, Any],
) -> None:
    def slow(value: str) -> dict[str, Any]:
        properties = {"value": value, "action_wait_secs": {"update": 2}}
        return {
            "heat_template_version": "2016-10-14",
            "resources": {"slow": {"type": "OS::Heat::TestResource", "properties": properties}},
            "outputs": {"value": {"value": {"get_attr": ["slow", "output"]}}},
        }

    _, _, hc = api

    def run() -> tuple[str, str, str]:
        stack_id = hc.stacks.create(stack_name="cancelled", template=slow("one"))["stack"]["id"]
        wait_for(hc, stack_id, "CREATE_COMPLETE")
        hc.stacks.update(stack_id, template=slow("two"))
        during = hc.stacks.get(stack_id).stack_status
        hc.actions.cancel_update(stack_id)
        wait_for(hc, stack_id, "ROLLBACK_COMPLETE")
        return during, hc.stacks.output_show(stack_id, "value")["output"]["output_value"], stack_id

    during, value, _ = await asyncio.to_thread(run)
    assert during == "UPDATE_IN_PROGRESS"
    assert value == "one"


@pytest.mark.parametrize(
    ("method", "path", "body"), [("POST", "snapshots", {"name": "s"}), ("DELETE", "abandon", None)]
)
async def test_a_stack_request_that_deadlocks_over_the_stacks_rows_is_tried_again(
    api: tuple[Converge, str, Any], method: str, path: str, body: Any
) -> None:
    """A snapshot or an abandon claims the stack's rows in id order. Another transaction
    that holds the last row and then asks for the first (as a job result may, locking a
    wait condition's handle) makes a deadlock; PostgreSQL ends the request's transaction,
    and the request runs again instead of answering 409."""
    cv, base, hc = api
    stack_id = await created(hc, "locked")
    ids = sorted(r["resource_id"] for r in await cv.rows(StackId(uuid.UUID(stack_id))))
    async with cv.pool.acquire() as other:
        await other.execute("SET deadlock_timeout = '60s'")  # the request's side finds the deadlock
        async with other.transaction():
            await other.execute("SELECT 1 FROM resources WHERE resource_id = $1 FOR UPDATE", ids[-1])
            url = f"{base}/v1/p1/stacks/locked/{stack_id}/{path}"
            request = asyncio.create_task(call(method, url, "t1", body))

            async def request_waits_for_the_row() -> bool:
                waiting = await cv.pool.fetchval(
                    """SELECT count(*) FROM pg_stat_activity
                       WHERE datname = current_database() AND wait_event_type = 'Lock'"""
                )
                return bool(waiting)

            await eventually(request_waits_for_the_row)  # it holds the first row by now
            await other.execute("SELECT 1 FROM resources WHERE resource_id = $1 FOR UPDATE", ids[0])
        status, answer, _ = await request
    assert status == 200, answer
