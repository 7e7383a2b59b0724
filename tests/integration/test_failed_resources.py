"""Every failed resource can be deleted: the rollback of a failed create and the delete of
a failed stack end COMPLETE with nothing left behind; a delete the cloud refuses ends
DELETE_FAILED with the cloud's reason, and deleting again succeeds once the cloud allows it.

Real: a `converge up` process (PostgreSQL, its in-process bus and sandbox cloud) driven
over its HTTP API, the sandbox's own API, and a REST API on 127.0.0.1 (tests/support/
fake_rest_api.py) managed through Converge::HTTP::Resource.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_rest_api import FakeApi, serve
from tests.support.up_api import UpApi, up_api

pytestmark = pytest.mark.integration

VERSION = "2021-04-16"


@pytest.fixture
async def api() -> AsyncIterator[FakeApi]:
    async with serve(FakeApi()) as running:
        yield running


@pytest.fixture
async def up(tmp_path: Path, database_url: str, api: FakeApi) -> AsyncIterator[UpApi]:
    allowed = {"CONVERGE_HTTP_ALLOWED_HOSTS": f"127.0.0.1:{api.port}"}  # the fake cloud only
    async with up_api(tmp_path, database_url, env=allowed) as client:
        yield client


def items(api: FakeApi, count: int = 1) -> dict[str, Any]:
    """Items of the fake API whose create the cloud turns to ERROR (status_field)."""
    properties = {"url": f"{api.base}/things", "body": {"size": 1}, "status_field": "status"}
    resources = {
        f"item{i}": {"type": "Converge::HTTP::Resource", "properties": properties} for i in range(count)
    }
    return {"heat_template_version": VERSION, "resources": resources}


async def test_a_create_the_cloud_turns_to_error_rolls_back_to_nothing(up: UpApi, api: FakeApi) -> None:
    api.create_status = "ERROR"
    stack = await up.create("errored", items(api, 2), rollback=True)
    settled = await up.settle(stack)
    assert settled["stack_status"] == "ROLLBACK_COMPLETE", settled["stack_status_reason"]
    assert len(api.created) == 2, "the cloud made both items"
    assert api.items == {}, "the rollback deleted what the failed create made"
    deletes = sorted(s.path for s in api.seen if s.method == "DELETE")
    assert deletes == sorted(f"/things/{i}" for i in api.created)
    events = [(e["resource_name"], e["resource_status"]) for e in await up.events(stack)]
    assert ("item0", "CREATE_FAILED") in events
    assert ("item0", "DELETE_COMPLETE") in events


async def test_a_failed_stack_is_deleted_and_a_refused_delete_succeeds_once_the_cloud_allows_it(
    up: UpApi, api: FakeApi
) -> None:
    api.create_status = "ERROR"
    stack = await up.create("failed", items(api))
    failed = await up.settle(stack)
    assert failed["stack_status"] == "CREATE_FAILED"
    assert "status is ERROR" in failed["stack_status_reason"]
    assert len(api.items) == 1

    api.refuse_deletes = "the item is locked by a backup"
    await up.ok("DELETE", stack.path)
    refused = await up.settle(stack)
    assert refused["stack_status"] == "DELETE_FAILED"
    assert "409: the item is locked by a backup" in refused["stack_status_reason"]
    assert len(api.items) == 1

    api.refuse_deletes = None  # the cloud allows it now: deleting again succeeds
    await up.ok("DELETE", stack.path)
    assert await up.settle(stack) == {}, "the stack is gone"
    assert api.items == {}


async def test_failed_sandbox_creates_roll_back_to_nothing(tmp_path: Path, database_url: str) -> None:
    template = {
        "heat_template_version": VERSION,
        "resources": {
            "data": {"type": "Sandbox::Volume", "properties": {"size": 1}},
            "thing": {"type": "Sandbox::Thing", "properties": {"fail": True}},
        },
    }
    # Every build in this sandbox ends in ERROR: the volume too, not only the failing thing.
    async with up_api(tmp_path, database_url, env={"CONVERGE_SANDBOX_FAILURE_RATE": "1"}) as up:
        stack = await up.create("broken", template, rollback=True)
        settled = await up.settle(stack)
        assert settled["stack_status"] == "ROLLBACK_COMPLETE", settled["stack_status_reason"]
        assert await up.sandbox.inventory() == []
        failed = {
            e["resource_name"] for e in await up.events(stack) if e["resource_status"] == "CREATE_FAILED"
        }
        assert failed == {"broken", "data", "thing"}  # the stack and both resources


async def test_a_network_the_sandbox_refuses_to_delete_is_deleted_once_nothing_uses_it(up: UpApi) -> None:
    template = {
        "heat_template_version": VERSION,
        "resources": {"net": {"type": "Sandbox::Network", "properties": {"name": "shared"}}},
    }
    stack = await up.create("network", template)
    assert (await up.settle(stack))["stack_status"] == "CREATE_COMPLETE"
    net = (await up.physical_ids(stack))["net"]
    stray = await up.sandbox.ok("POST", "/servers", {"image": "cirros", "networks": [net]})

    await up.ok("DELETE", stack.path)
    refused = await up.settle(stack)
    assert refused["stack_status"] == "DELETE_FAILED"
    assert (
        f"cannot delete network {net}: it is still used by server {stray['id']}"
        in (refused["stack_status_reason"])
    )

    await up.sandbox.ok("DELETE", f"/servers/{stray['id']}")
    await up.ok("DELETE", stack.path)
    assert await up.settle(stack) == {}
    assert await up.sandbox.inventory() == []
