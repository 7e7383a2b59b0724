"""Another project's stack cannot be taken over, probed or reached (review findings C1, L1, L7, L8).

Real: a `converge up` process (tests.support.hostile.start_server: PostgreSQL of the
test, in-process bus and sandbox, tokens for projects alpha and beta and an admin),
driven over real HTTP. Project beta owns the victim stack; project alpha attacks it
with ids that are no secret (they are in every stack URL). One test writes a stack id
straight into a resource row in PostgreSQL, as a takeover made before this fix left it,
to prove the engine checks ownership every time it acts on a child, not only at create.
"""

from __future__ import annotations

import io
import itertools
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest

from tests.support.hostile import Api, Server, start_server
from tests.support.tenancy import Tenant, hot, message, nested_stack, tenants, unknown_id, value

pytestmark = pytest.mark.integration

VICTIM = hot({"precious": value("beta-data")}, {"out": {"value": {"get_attr": ["precious", "output"]}}})
TAKEOVER = {"owned": value("alpha-was-here")}


@pytest.fixture
async def served(tmp_path: Path, database_url: str) -> AsyncIterator[tuple[Server, Api]]:
    async with start_server(tmp_path, database_url) as server, aiohttp.ClientSession() as http:
        yield server, Api(http, server.base)


def nesting_types(ref: str) -> dict[str, dict[str, Any]]:
    """Every kind of nested resource, each naming `ref` as its external_id."""
    return {
        "OS::Heat::Stack": nested_stack({}, external_id=ref),
        "OS::Heat::ResourceGroup": {
            "type": "OS::Heat::ResourceGroup",
            "properties": {"count": 0, "resource_def": {"type": "OS::Heat::None"}},
            "external_id": ref,
        },
        "template resource": {"type": "inner.yaml", "external_id": ref},
    }


async def refusal(tenant: Tenant, method: str, path: str, body: dict[str, Any], ref: str) -> tuple[int, str]:
    """The status and message a request naming `ref` gets, with `ref` blanked out."""
    response = await tenant.call(method, path, json=body)
    return response.status, message(response).replace(ref, "<id>") if response.status >= 400 else ""


async def test_an_external_id_naming_another_projects_stack_is_refused_as_an_unknown_id(
    served: tuple[Server, Api],
) -> None:
    alpha, beta, _ = tenants(served[1])
    victim = await beta.created("victim", VICTIM)
    before = await beta.snapshot(victim)
    own = await alpha.created("own", hot({"v": value("a")}))
    own_url = await alpha.url("own")
    files = {"inner.yaml": json.dumps(hot({}))}
    for kind in nesting_types(""):
        answers = set()
        for ref in (victim, unknown_id()):
            resources = {"n": nesting_types(ref)[kind]}
            create = {"stack_name": "evil", "template": hot(resources), "files": files}
            update = {"template": hot({"v": value("a"), **resources}), "files": files}
            answers |= {
                await refusal(alpha, "POST", alpha.stacks, create, ref),
                await refusal(alpha, "POST", f"{alpha.stacks}/preview", create, ref),
                await refusal(alpha, "PUT", own_url, update, ref),
                await refusal(alpha, "PATCH", own_url, update, ref),
                await refusal(alpha, "PUT", f"{own_url}/preview", update, ref),
            }
        assert answers == {(400, "resources.n.external_id: there is no stack <id> in this project")}, kind
    assert await alpha.listed() == ["own"]
    assert (await alpha.snapshot(own))["status"] == "CREATE_COMPLETE", "refused before anything changed"
    assert await beta.snapshot(victim) == before


async def test_adopt_data_naming_another_projects_stack_is_refused_as_an_unknown_id(
    served: tuple[Server, Api],
) -> None:
    alpha, beta, _ = tenants(served[1])
    victim = await beta.created("victim", VICTIM)
    before = await beta.snapshot(victim)
    answers = set()
    for ref in (victim, unknown_id()):
        template = hot({"n": nested_stack(TAKEOVER)})
        adopt = {"template": template, "resources": {"n": {"resource_id": ref}}}
        body = {"stack_name": "evil", "template": template, "adopt_stack_data": adopt}
        answers.add(await refusal(alpha, "POST", alpha.stacks, body, ref))
    expected = (400, "adopt_stack_data.resources.n.resource_id: there is no stack <id> in this project")
    assert answers == {expected}
    assert await alpha.listed("?show_nested=true") == []
    assert await beta.snapshot(victim) == before


async def test_a_row_naming_another_projects_stack_never_reaches_it(
    served: tuple[Server, Api], database_url: str
) -> None:
    """As a takeover made before the fix left it: alpha's nested row holds beta's stack id.
    Check, suspend, resume, update and delete of alpha's stack act on alpha's side only."""
    alpha, beta, _ = tenants(served[1])
    victim = await beta.created("victim", VICTIM)
    before = await beta.snapshot(victim)
    evil = await alpha.created("evil", hot({"n": nested_stack({"mine": value("m")})}))
    url = await alpha.url("evil")

    async def point_at_victim() -> None:
        conn = await asyncpg.connect(database_url)
        try:
            await conn.execute(
                "UPDATE resources SET physical_id = $1 WHERE stack_id = $2 AND name = 'n'", victim, evil
            )
        finally:
            await conn.close()

    await point_at_victim()
    for action, outcome in (
        ("check", "CHECK_FAILED"),
        ("suspend", "SUSPEND_FAILED"),
        ("resume", "RESUME_FAILED"),
    ):
        assert (await alpha.call("POST", f"{url}/actions", json={action: None})).status == 200
        assert await alpha.settled("evil") == outcome
        reasons = [r["resource_status_reason"] for r in (await alpha.resources("evil")).values()]
        assert any("the nested stack does not exist" in r for r in reasons), reasons
        assert await beta.snapshot(victim) == before
    changed = hot({"n": nested_stack(TAKEOVER)})
    assert (await alpha.call("PUT", url, json={"template": changed})).status == 202
    assert await alpha.settled("evil") == "UPDATE_COMPLETE"
    assert (await alpha.resources("evil"))["n"]["physical_resource_id"] != victim, "a child of its own"
    assert await beta.snapshot(victim) == before
    await point_at_victim()
    assert (await alpha.call("DELETE", url)).status == 204
    assert await alpha.settled("evil") == "MISSING", "deleted"
    assert await beta.snapshot(victim) == before


async def test_an_id_taken_between_the_api_and_the_engine_fails_only_the_resource(
    served: tuple[Server, Api],
) -> None:
    """The API's check passes for both stacks naming one free stack; whichever resource runs
    second fails with the reason, and the first keeps it."""
    alpha, _, _ = tenants(served[1])
    loose = await alpha.created("loose", hot({"kept": value("k")}))
    gated = hot(
        {
            "handle": {"type": "OS::Heat::WaitConditionHandle"},
            "gate": {
                "type": "OS::Heat::WaitCondition",
                "properties": {"handle": {"get_resource": "handle"}, "timeout": 600},
            },
            "n": {
                "type": "OS::Heat::Stack",
                "external_id": loose,
                "properties": {
                    "template": hot({}) | {"parameters": {"x": {"type": "string"}}},
                    "parameters": {"x": {"get_attr": ["gate", "data"]}},
                },
            },
        }
    )
    await alpha.create("first", gated)
    await alpha.created("second", hot({"n": nested_stack({}, external_id=loose)}))
    url = await alpha.url("first")
    signal = await alpha.call("POST", f"{url}/resources/handle/signal", json={"status": "SUCCESS"})
    assert signal.status == 200, signal.body
    assert await alpha.settled("first") == "CREATE_FAILED"
    n = (await alpha.resources("first"))["n"]
    assert n["resource_status"] == "ADOPT_FAILED"
    assert n["resource_status_reason"] == (
        f"Resource ADOPT failed: resources.n.external_id: stack {loose} "
        "is the nested stack of another resource"
    )
    assert (await alpha.resources("second"))["n"]["physical_resource_id"] == loose
    assert sorted(await alpha.listed()) == ["first", "second"], "the adopted stack is nested now"
    assert (await alpha.snapshot(loose))["status"] == "CREATE_COMPLETE"


async def test_signals_without_a_project_token_learn_nothing(served: tuple[Server, Api]) -> None:
    """L1: every unauthenticated signal that is not the handle's own answers one 401."""
    _, beta, _ = tenants(served[1])
    template = hot(
        {
            "h": {"type": "OS::Heat::WaitConditionHandle"},
            "v": {"type": "OS::Heat::Value", "properties": {"value": 1}},
        }
    )
    victim = await beta.created("bstack", template)
    url = await beta.url("bstack")
    token = (await beta.call("GET", f"{url}/resources/h")).body["resource"]["attributes"]["token"]
    handle_shaped = "0" * 48
    probes = [
        (f"{url}/signal", None),
        (f"{url}/resources/nope/signal", None),
        (f"{url}/resources/v/signal", None),
        (f"{url}/resources/h/signal", None),
        (f"/v1/beta/stacks/bstack/{unknown_id()}/resources/h/signal", None),
        ("/v1/beta/stacks/bstack/resources/h/signal", None),
        (f"{url}/resources/h/signal", "not-a-handle-token"),
        (f"{url}/resources/nope/signal", handle_shaped),
        (f"{url}/resources/v/signal", handle_shaped),
        (f"{url}/resources/h/signal", handle_shaped),
        (f"{url}/resources/v/signal", token),
        (f"{url}/resources/nope/signal", token),
        (f"/v1/alpha/stacks/bstack/{victim}/resources/h/signal", token),
        (f"/v1/beta/stacks/other/{victim}/resources/h/signal", token),
        (f"{url}/resources/%00/signal", handle_shaped),
        (f"{url}/resources/h", token),
    ]
    answers = set()
    for (path, sent), body in itertools.product(probes, [b"{}", b"not json", b"[1]"]):  # bad bodies too
        headers = {"Content-Type": "application/json"}
        response = await beta.api.call("POST", path, token=sent, data=body, headers=headers)
        assert "nope" not in json.dumps(response.body), path
        assert "bstack" not in json.dumps(response.body), path
        answers.add((response.status, json.dumps(response.body, sort_keys=True)))
    for path, sent in [p for p in probes if p[1] in (handle_shaped, token)]:  # a body past the size limit
        headers = {"Content-Type": "application/json", **({"X-Auth-Token": sent} if sent else {})}
        large = io.BytesIO(b"{" * 3 * 2**20)
        async with beta.api.http.post(f"{beta.api.base}{path}", data=large, headers=headers) as posted:
            answers.add((posted.status, json.dumps(await posted.json(), sort_keys=True)))
    assert len(answers) == 1, answers
    ((status, _),) = answers
    assert status == 401
    # The handle's own token gets past authentication: the handle answers on its merits (its
    # stack is complete and no condition waits on it, so it takes no more signals).
    ok = await beta.api.call("POST", f"{url}/resources/h/signal", token=token, json={"data": "x"})
    assert (ok.status, ok.body["error"]["type"]) == (409, "SignalsClosed"), ok.body


async def test_paging_markers_resolve_only_within_the_callers_project_and_stack(
    served: tuple[Server, Api],
) -> None:
    """L7: another project's stack or event id as a marker is an unknown marker."""
    alpha, beta, _ = tenants(served[1])
    await alpha.created("a1", hot({"v": value("1")}))
    victim = await beta.created("b1", hot({"v": value("2")}))
    await alpha.created("a2", hot({"v": value("3")}))
    foreign_event = (await beta.events("b1"))[0]["id"]
    for direction in ("desc", "asc"):
        query = f"?sort_dir={direction}&marker="
        assert await alpha.listed(query + victim) == await alpha.listed(query + unknown_id()) == []
        events = await alpha.events("a1", query + foreign_event)
        assert events == await alpha.events("a1", query + unknown_id()) == []
    assert await alpha.listed(f"?id={victim}") == []


async def test_an_admin_reaches_a_stack_only_under_its_own_projects_url(served: tuple[Server, Api]) -> None:
    """L8: /v1/zzz/stacks/<beta's stack> is 404 for an admin, not a redirect to it."""
    _, beta, admin = tenants(served[1])
    victim = await beta.created("bstack", hot({"v": value("b")}))
    for ident in ("bstack", victim, f"bstack/{victim}", f"bstack/{victim}/resources"):
        for project in ("zzz", "admin"):
            response = await admin.call("GET", f"/v1/{project}/stacks/{ident}")
            assert response.status == 404, (project, ident, response.status)
    shown = await admin.call("GET", f"/v1/beta/stacks/bstack/{victim}")
    assert shown.status == 200
    assert await admin.listed() == []
    assert "bstack" in await admin.listed("?global_tenant=true")
