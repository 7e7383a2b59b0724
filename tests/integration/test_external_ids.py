"""external_id keeps Heat's meaning: an adopted resource is not managed, so it is let go of, never deleted.

Real: a `converge up` process (tests.support.hostile.start_server) and its in-process
sandbox cloud, over real HTTP; "the real resource is still there" is asked of the
sandbox's own API. A resource adopted through adopt_stack_data is managed afterwards
(deleted with its stack), as in Heat.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.hostile import Api, Server, start_server
from tests.support.tenancy import Tenant, hot, nested_stack, tenants, value

pytestmark = pytest.mark.integration


@pytest.fixture
async def served(tmp_path: Path, database_url: str) -> AsyncIterator[tuple[Server, Api]]:
    async with start_server(tmp_path, database_url) as server, aiohttp.ClientSession() as http:
        yield server, Api(http, server.base)


async def made_outside(api: Api, name: str) -> str:
    """A thing made in the sandbox cloud by hand, not by any stack; its id."""
    response = await api.call("POST", "/sandbox/v1/things", json={"name": name, "data": {"v": 1}})
    assert response.status == 201, response.body
    return str(response.body["id"])


async def exists(api: Api, thing: str) -> bool:
    response = await api.call("GET", f"/sandbox/v1/things/{thing}")
    assert response.status in (200, 404), response.body
    return response.status == 200


def thing(name: str, data: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "Sandbox::Thing", "properties": {"name": name, "data": data}, **extra}


async def test_things_adopted_through_external_id_outlive_removal_updates_and_stack_delete(
    served: tuple[Server, Api],
) -> None:
    api = served[1]
    alpha, _, _ = tenants(api)
    kept, dropped = await made_outside(api, "kept"), await made_outside(api, "dropped")
    template = hot(
        {
            "kept": thing("kept", {"v": 1}, external_id=kept),
            "dropped": thing("dropped", {"v": 1}, external_id=dropped),
            "managed": thing("managed", {"v": 1}),
        }
    )
    await alpha.created("s", template)
    rows = await alpha.resources("s")
    assert {n: r["resource_status"] for n, r in rows.items() if n != "managed"} == {
        "kept": "ADOPT_COMPLETE",
        "dropped": "ADOPT_COMPLETE",
    }
    managed = rows["managed"]["physical_resource_id"]

    changed = hot({"kept": thing("kept", {"v": 2}, external_id=kept), "managed": thing("managed", {"v": 1})})
    assert (await alpha.call("PUT", await alpha.url("s"), json={"template": changed})).status == 202
    assert await alpha.settled("s") == "UPDATE_COMPLETE"
    assert (await alpha.resources("s"))["kept"]["resource_status"] == "UPDATE_COMPLETE", "updated in place"
    assert await exists(api, dropped), "removed from the template: let go of, not deleted"
    let_go = [e for e in await alpha.events("s") if e["resource_name"] == "dropped"][-1]
    assert let_go["resource_status"] == "DELETE_COMPLETE"
    assert let_go["resource_status_reason"].startswith("Let go (adopted through external_id")

    assert (await alpha.call("DELETE", await alpha.url("s"))).status == 204
    assert await alpha.settled("s") == "MISSING"
    assert await exists(api, kept), "adopted, then updated, and still not deleted with its stack"
    assert not await exists(api, managed), "the stack's own thing is deleted"


async def test_a_stack_adopted_through_external_id_is_released_not_deleted(
    served: tuple[Server, Api],
) -> None:
    alpha, _, _ = tenants(served[1])
    loose = await alpha.created("loose", hot({"v": value("mine")}))
    before = await alpha.snapshot(loose)
    adopting = hot({"n": nested_stack({}, external_id=loose)})
    await alpha.created("holder", adopting)
    assert (await alpha.resources("holder"))["n"]["physical_resource_id"] == loose
    assert await alpha.listed() == ["holder"], "adopted: a nested stack now"

    url = await alpha.url("holder")
    assert (await alpha.call("PUT", url, json={"template": hot({})})).status == 202
    assert await alpha.settled("holder") == "UPDATE_COMPLETE"
    assert sorted(await alpha.listed()) == ["holder", "loose"], "removed from the template: released"
    assert await alpha.snapshot(loose) == before

    assert (await alpha.call("PUT", url, json={"template": adopting})).status == 202
    assert await alpha.settled("holder") == "UPDATE_COMPLETE"
    assert await alpha.listed() == ["holder"], "adopted again"
    assert (await alpha.call("DELETE", url)).status == 204
    assert await alpha.settled("holder") == "MISSING"
    assert await alpha.listed() == ["loose"], "its stack deleted: released, a top-level stack again"
    assert await alpha.snapshot(loose) == before


async def test_abandon_releases_child_stacks_and_adopt_data_takes_them_back_managed(
    served: tuple[Server, Api],
) -> None:
    alpha: Tenant = tenants(served[1])[0]
    await alpha.created("tree", hot({"kid": nested_stack({"v": value("k")})}))
    child = (await alpha.resources("tree"))["kid"]["physical_resource_id"]
    abandoned = await alpha.call("DELETE", f"{await alpha.url('tree')}/abandon")
    assert abandoned.status == 200, abandoned.body
    assert abandoned.body["resources"]["kid"]["resource_id"] == child
    (name,) = await alpha.listed()
    assert name.startswith("tree-kid-"), "left in place, a top-level stack of the project"

    body = {"adopt_stack_data": abandoned.body, "template": abandoned.body["template"]}
    await alpha.created("again", body.pop("template"), **body)
    assert (await alpha.resources("again"))["kid"]["physical_resource_id"] == child
    assert await alpha.listed() == ["again"], "adopted: nested again"
    assert (await alpha.call("DELETE", await alpha.url("again"))).status == 204
    assert await alpha.settled("again") == "MISSING"
    assert await alpha.listed("?show_nested=true") == [], "adopted through adopt data: managed, deleted"
