"""Every route and every way an id can be smuggled in is refused for another project's objects.

Real: a `converge up` process (tests.support.hostile.start_server) over real HTTP.
Project beta owns the victim stack (a resource, a wait-condition handle, a nested
stack, an output); project alpha owns a stack of its own. The routes come from the
server's own `/openapi.json`; each is requested with alpha's token, under beta's
project URL and under alpha's own with beta's ids, with every method and action it
takes. Then the ways an id travels in a body or a query (external_id, adopt data,
paging markers, event ids, signals with another handle's token) are tried from
alpha's own stack. Afterwards the victim is exactly as it was.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.hostile import Api, Server, start_server
from tests.support.tenancy import Tenant, hot, message, nested_stack, tenants, unknown_id, value

pytestmark = pytest.mark.integration

#: Routes without a project, that hold no tenant's objects.
PUBLIC = {
    "/healthz",
    "/readyz",
    "/metrics",
    "/openapi.json",
    "/",
    "/dashboard/{file}",
    "/favicon.ico",
    "/healthcheck",
    "/v1",
    "/v1/",
}
#: Project-level routes: no stack in the path; the ids they take are tried below (`smuggled`).
PROJECT_LEVEL = {
    "/v1/{project_id}/stacks",
    "/v1/{project_id}/stacks/preview",
    "/v1/{project_id}/resource_types",
    "/v1/{project_id}/resource_types/{type_name}",
    "/v1/{project_id}/resource_types/{type_name}/template",
    "/v1/{project_id}/template_versions",
    "/v1/{project_id}/template_versions/{version}/functions",
    "/v1/{project_id}/validate",
    # software configs: another project's config id is tried in
    # test_another_projects_software_config_is_unknown_under_every_route
    "/v1/{project_id}/software_configs",
    "/v1/{project_id}/software_configs/{config_id}",
    # Heat's, not Converge's: they answer 501 and look nothing up
    "/v1/{project_id}/services",
    "/v1/{project_id}/software_deployments",
    "/v1/{project_id}/software_deployments/metadata/{server_id}",
    "/v1/{project_id}/software_deployments/{deployment_id}",
    "/v1/{project_id}/build_info",
    # a deployment's signal URL: the right token under another project's URL is 401, tried in
    # test_heat_parity_deployment_transports_and_actions
    "/v1/{project_id}/software_deployments/{deployment_id}/signal/{signal_token}",
}
ACTIONS = [
    {"check": None},
    {"suspend": None},
    {"resume": None},
    {"cancel_update": None},
    {"cancel_without_rollback": None},
    {"observe_start": {"interval": 5}},
    {"observe_stop": None},
]
TAKEOVER = hot({"owned": value("alpha-was-here")})


@dataclass
class Victim:
    stack_id: str
    url: str
    event_id: str
    child_id: str  # its nested stack
    handle_token: str
    snapshot_id: str  # a snapshot of it


@pytest.fixture
async def served(tmp_path: Path, database_url: str) -> AsyncIterator[tuple[Server, Api]]:
    async with start_server(tmp_path, database_url) as server, aiohttp.ClientSession() as http:
        yield server, Api(http, server.base)


async def make_victim(beta: Tenant) -> Victim:
    template = hot(
        {
            "precious": value("beta-data"),
            "h": {"type": "OS::Heat::WaitConditionHandle"},
            "kid": nested_stack({"inner": value("inside")}),
        },
        {"out": {"value": {"get_attr": ["precious", "output"]}}},
    )
    stack_id = await beta.created("bstack", template)
    url = await beta.url("bstack")
    resources = await beta.resources("bstack")
    handle = (await beta.call("GET", f"{url}/resources/h")).body["resource"]
    snapshot = await beta.call("POST", f"{url}/snapshots", json={"name": "beta's"})
    assert snapshot.status == 200, snapshot.body
    assert await beta.settled("bstack") == "SNAPSHOT_COMPLETE"
    return Victim(
        stack_id,
        url,
        (await beta.events("bstack"))[0]["id"],
        resources["kid"]["physical_resource_id"],
        handle["attributes"]["token"],
        snapshot.body["id"],
    )


async def seen_by_beta(beta: Tenant, victim: Victim) -> dict[str, Any]:
    """Everything of the victim: both stacks, the handle's signals, the events."""
    handle = (await beta.call("GET", f"{victim.url}/resources/h")).body["resource"]
    return {
        "stack": await beta.snapshot(victim.stack_id),
        "child": await beta.snapshot(victim.child_id),
        "handle": handle["attributes"],
        "events": len(await beta.events("bstack")),
        "observation": (await beta.call("GET", f"{victim.url}/observation")).body,
        "snapshots": (await beta.call("GET", f"{victim.url}/snapshots")).body,
    }


def requests_for(path: str, method: str, victim: Victim, project: str) -> list[tuple[str, str, Any]]:
    """(method, path, body) for one documented route, filled with the victim's ids under
    `project`'s URL; every action for the actions route, both stack identities."""
    values = {
        "project_id": project,
        "stack_name": "bstack",
        "stack_id": victim.stack_id,
        "resource_name": "precious",
        "event_id": victim.event_id,
        "output_key": "out",
        "snapshot_id": victim.snapshot_id,
    }
    identities = ["bstack", victim.stack_id] if "{stack_identity}" in path else [None]
    bodies: list[Any] = [None]
    if path.endswith("/actions"):
        bodies = list(ACTIONS)
    elif method in ("PUT", "PATCH") and path.endswith(("{stack_id}", "{stack_identity}", "/preview")):
        bodies = [{"template": TAKEOVER}]
    elif method == "PATCH":
        bodies = [{"mark_unhealthy": True, "resource_status_reason": "alpha"}]
    elif method == "POST":
        bodies = [{}]
    out = []
    for identity in identities:
        filled = re.sub(r"\{(\w+)\}", lambda m: identity or values[m[1]], path)  # noqa: B023
        out += [(method, filled, body) for body in bodies]
    return out


async def test_every_route_refuses_another_projects_stack_and_it_stays_unchanged(
    served: tuple[Server, Api],
) -> None:
    alpha, beta, _ = tenants(served[1])
    victim = await make_victim(beta)
    before = await seen_by_beta(beta, victim)
    await alpha.created("astack", hot({"mine": value("a"), "h": {"type": "OS::Heat::WaitConditionHandle"}}))

    document = (await alpha.api.call("GET", "/openapi.json")).body
    skipped, tried, wrong = set(), 0, []
    for path, item in document["paths"].items():
        if path in PUBLIC or path in PROJECT_LEVEL:
            skipped.add(path)
            continue
        for method in item:
            for project in ("beta", "alpha"):
                for verb, filled, body in requests_for(path, method.upper(), victim, project):
                    response = await alpha.call(verb, filled, json=body, timeout=30)
                    tried += 1
                    text = str(response.body)
                    if response.status != 404 or "EntityNotFound" not in text or "beta-data" in text:
                        wrong.append((verb, filled, body, response.status, text[:200]))
    assert skipped == PUBLIC | PROJECT_LEVEL, "a new route: say how its ids are checked"
    assert tried > 70, "each route under both project URLs, each action, both stack identities"
    assert wrong == [], "\n".join(map(str, wrong))
    assert await seen_by_beta(beta, victim) == before


async def test_every_way_an_id_travels_in_a_request_is_refused_and_the_victim_stays_unchanged(
    served: tuple[Server, Api],
) -> None:
    alpha, beta, _ = tenants(served[1])
    victim = await make_victim(beta)
    before = await seen_by_beta(beta, victim)
    await alpha.created("astack", hot({"mine": value("a"), "h": {"type": "OS::Heat::WaitConditionHandle"}}))
    mine = await alpha.url("astack")
    alpha_token = (await alpha.call("GET", f"{mine}/resources/h")).body["resource"]["attributes"]["token"]

    async def refusal(method: str, path: str, body: Any, ref: str) -> tuple[int, str]:
        response = await alpha.call(method, path, json=body)
        return response.status, message(response).replace(ref, "<id>")

    for ref in (victim.stack_id, victim.child_id):
        unknown = unknown_id()
        for method, path, body_of in (
            (
                "POST",
                alpha.stacks,
                lambda r: {"stack_name": "e", "template": hot({"n": nested_stack({}, external_id=r)})},
            ),
            (
                "POST",
                f"{alpha.stacks}/preview",
                lambda r: {"stack_name": "e", "template": hot({"n": nested_stack({}, external_id=r)})},
            ),
            ("PUT", mine, lambda r: {"template": hot({"n": nested_stack({}, external_id=r)})}),
            ("PATCH", mine, lambda r: {"template": hot({"n": nested_stack({}, external_id=r)})}),
            ("PUT", f"{mine}/preview", lambda r: {"template": hot({"n": nested_stack({}, external_id=r)})}),
            (
                "POST",
                alpha.stacks,
                lambda r: {
                    "stack_name": "e",
                    "template": hot({"n": nested_stack({})}),
                    "adopt_stack_data": {
                        "template": hot({"n": nested_stack({})}),
                        "resources": {"n": {"resource_id": r}},
                    },
                },
            ),
        ):
            foreign = await refusal(method, path, body_of(ref), ref)
            assert foreign[0] == 400, (method, path, foreign)
            assert foreign == await refusal(method, path, body_of(unknown), unknown), (method, path)

    for query in ("", "&sort_dir=asc"):
        assert await alpha.listed(f"?marker={victim.stack_id}{query}") == await alpha.listed(
            f"?marker={unknown_id()}{query}"
        )
        assert await alpha.events("astack", f"?marker={victim.event_id}{query}") == await alpha.events(
            "astack", f"?marker={unknown_id()}{query}"
        )
    for query in (f"?id={victim.stack_id}", f"?id={victim.child_id}"):
        assert await alpha.listed(query) == [], query
    for query in ("?show_nested=true", "?global_tenant=true"):
        assert await alpha.listed(query) == ["astack"], query
    for path in (f"{mine}/events/{victim.event_id}", f"{mine}/resources/mine/events/{victim.event_id}"):
        assert (await alpha.call("GET", path)).status == 404, path
    tree = await alpha.call("GET", f"{mine}/resources?nested_depth=5")
    assert sorted(r["resource_name"] for r in tree.body["resources"]) == ["h", "mine"]

    signals = [
        (f"{mine}/resources/h/signal", victim.handle_token),  # beta's handle token, alpha's handle
        (f"{victim.url}/resources/h/signal", alpha_token),  # alpha's handle token, beta's handle
        (f"/v1/alpha/stacks/bstack/{victim.stack_id}/resources/h/signal", victim.handle_token),
    ]
    for path, token in signals:
        response = await alpha.api.call("POST", path, token=token, json={"data": "smuggled"})
        assert response.status == 401, (path, response.status)
    assert await seen_by_beta(beta, victim) == before


async def test_another_projects_software_config_is_unknown_under_every_route(
    served: tuple[Server, Api],
) -> None:
    alpha, beta, _ = tenants(served[1])
    made = await beta.call(
        "POST", "/v1/beta/software_configs", json={"name": "beta's", "config": "beta-data"}
    )
    assert made.status == 200, made.body
    victim = made.body["software_config"]
    await alpha.call("POST", "/v1/alpha/software_configs", json={"name": "alpha's", "config": "a"})

    async def answers(config_id: str) -> list[tuple[int, str]]:
        got = []
        for project in ("alpha", "beta"):
            for method in ("GET", "DELETE"):
                response = await alpha.call(method, f"/v1/{project}/software_configs/{config_id}")
                got.append((response.status, str(response.body).replace(config_id, "<id>")))
            response = await alpha.call("GET", f"/v1/{project}/software_configs?marker={config_id}")
            got.append((response.status, str(response.body).replace(config_id, "<id>")))
        return got

    foreign = await answers(victim["id"])
    assert foreign == await answers(unknown_id())
    assert [status for status, _ in foreign] == [404, 404, 400, 404, 404, 404]
    assert all("beta-data" not in text for _, text in foreign)
    listed = (await alpha.call("GET", "/v1/alpha/software_configs")).body["software_configs"]
    assert [c["name"] for c in listed] == ["alpha's"]
    shown = await beta.call("GET", f"/v1/beta/software_configs/{victim['id']}")
    assert shown.body == {"software_config": victim}
