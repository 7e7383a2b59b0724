"""`/openapi.json` documents every route the engine's app serves, and nothing else.

Real: the app as `build_app` assembles it (health routes, the Heat v1 API with
the engine's real dependencies, PostgreSQL behind them), served over real HTTP
on 127.0.0.1. The router is read for the aiohttp routes; the sub-paths that
`StackRoutes.dispatch` and `resources.dispatch` answer behind the catch-all
are listed here by hand, and each is requested for real to prove it exists.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from services.engine.api.app import build_app
from services.engine.api.auth import Tokens
from services.engine.api.openapi import openapi_document
from services.engine.api.requests import StackBody
from services.engine.core.model import StackId
from shared.health import Readiness, health_routes
from tests.support.convergence import Converge, converge

pytestmark = pytest.mark.integration

#: The catch-all route under which the dispatchers walk the path themselves.
CATCH_ALL = "/v1/{}/stacks/{}"
STACK = "/v1/{}/stacks/{}/{}"
RESOURCE = f"{STACK}/resources/{{}}"
#: (method, path) answered behind the catch-all; `{}` stands for any path parameter.
DISPATCHED = {
    *((method, CATCH_ALL) for method in ("GET", "PUT", "PATCH", "DELETE")),  # name or id alone: 302
    *((method, STACK) for method in ("GET", "PUT", "PATCH", "DELETE")),
    ("GET", f"{STACK}/template"),
    ("GET", f"{STACK}/template/source"),
    ("GET", f"{STACK}/environment"),
    ("GET", f"{STACK}/files"),
    ("GET", f"{STACK}/outputs"),
    ("GET", f"{STACK}/outputs/{{}}"),
    ("POST", f"{STACK}/actions"),
    ("DELETE", f"{STACK}/abandon"),
    ("GET", f"{STACK}/graph"),
    ("GET", f"{STACK}/stream"),
    ("GET", f"{STACK}/observation"),
    ("PUT", f"{STACK}/preview"),
    ("GET", f"{STACK}/resources"),
    ("GET", RESOURCE),
    ("PATCH", RESOURCE),
    ("GET", f"{RESOURCE}/metadata"),
    ("GET", f"{RESOURCE}/summary"),
    ("POST", f"{RESOURCE}/signal"),
    ("GET", f"{RESOURCE}/events"),
    ("GET", f"{RESOURCE}/events/{{}}"),
    ("GET", f"{STACK}/events"),
    ("GET", f"{STACK}/events/{{}}"),
    ("GET", f"{STACK}/export"),
    ("GET", f"{STACK}/snapshots"),
    ("POST", f"{STACK}/snapshots"),
    ("GET", f"{STACK}/snapshots/{{}}"),
    ("DELETE", f"{STACK}/snapshots/{{}}"),
    ("POST", f"{STACK}/snapshots/{{}}/restore"),
}
TOKENS = "t1=p1"
TEMPLATE = {
    "heat_template_version": "2016-10-14",
    "resources": {"test": {"type": "OS::Heat::TestResource", "properties": {"value": "v"}}},
    "outputs": {"out": {"value": {"get_attr": ["test", "output"]}}},
}


def shape(path: str) -> str:
    """A path with every parameter's name erased, so aiohttp's and the document's compare."""
    return re.sub(r"\{[^}]*\}", "{}", path)


def registered(app: web.Application) -> set[tuple[str, str]]:
    """(method, path shape) of every route on the router, the catch-all replaced by what it dispatches."""
    found: set[tuple[str, str]] = set()
    for resource in app.router.resources():
        for route in resource:
            if route.method == "HEAD":
                continue  # aiohttp adds HEAD to every GET by itself
            path = shape(resource.canonical)
            if route.method == "*":
                assert path == CATCH_ALL, f"a new catch-all route {path}: list what it dispatches"
                found |= DISPATCHED
            else:
                found.add((route.method, path))
    return found


def documented(document: dict[str, Any]) -> set[tuple[str, str]]:
    return {(method.upper(), shape(path)) for path, item in document["paths"].items() for method in item}


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[Converge]:
    async with converge(database_url, seed=0, duplicate_rate=0.0) as cv:
        yield cv


def app_of(cv: Converge) -> web.Application:
    """The app exactly as `converge up` and `Converge.http` build it."""
    health = health_routes(readiness=Readiness(), registry=CollectorRegistry())
    return build_app(health, api=cv.engine.api(), tokens=Tokens.parse(TOKENS))


async def test_the_document_lists_every_registered_route_and_nothing_else(engine: Converge) -> None:
    served = registered(app_of(engine))
    described = documented(openapi_document())
    assert served - described == set(), "routes served but not in /openapi.json"
    assert described - served == set(), "routes in /openapi.json that nothing serves"


async def test_a_route_added_without_documenting_it_is_noticed(engine: Converge) -> None:
    async def handler(_: web.Request) -> web.Response:
        return web.Response()

    app = app_of(engine)
    app.router.add_get("/v1/{project}/undocumented", handler)
    assert ("GET", "/v1/{}/undocumented") in registered(app) - documented(openapi_document())


async def test_v1_operations_need_the_token_and_service_routes_do_not() -> None:
    document = openapi_document()
    assert document["components"]["securitySchemes"]["XAuthToken"] == {
        "type": "apiKey",
        "in": "header",
        "name": "X-Auth-Token",
    }
    for path, item in document["paths"].items():
        for method, operation in item.items():
            needs_token = operation.get("security") == [{"XAuthToken": []}]
            assert needs_token == path.startswith("/v1/{project_id}"), (method, path)
            if needs_token:
                assert {"400", "401", "404"} <= set(operation["responses"]), (method, path)
    assert document["components"]["schemas"]["StackBody"] == StackBody.model_json_schema()


async def test_the_document_is_served_without_a_token_and_every_operation_answers(
    engine: Converge,
) -> None:
    """Each documented operation, sent for real, is routed (not a dispatcher's 'no such path')
    and answers one of the status codes the document gives it."""
    async with engine.http(TOKENS) as base, aiohttp.ClientSession() as http:
        async with http.get(f"{base}/openapi.json") as response:
            assert response.status == 200
            document = await response.json()
        assert document == openapi_document()
        values = await real_values(http, base, engine)
        operations = [
            (method, path, operation)
            for path, item in document["paths"].items()
            for method, operation in item.items()
        ]
        operations.sort(key=lambda op: op[0] == "delete")  # keep the stack until the end
        for method, path, operation in operations:
            url = base + path.format(**values)
            body = BODIES.get((method, path))
            headers = {"X-Auth-Token": "t1"} if "security" in operation else {}
            async with http.request(
                method, url, json=body, headers=headers, allow_redirects=False
            ) as response:
                if path.endswith("/stream") and response.status == 200:
                    text = (await response.content.readline()).decode()  # it never ends by itself
                else:
                    text = await response.text()
                assert str(response.status) in operation["responses"], (method, path, response.status, text)
                assert "no such path" not in text, (method, path)
            if response.status == 202:
                await engine.settled(StackId(uuid.UUID(values["stack_id"])))


ONE = "/v1/{project_id}/stacks/{stack_name}/{stack_id}"
BODIES: dict[tuple[str, str], Any] = {
    ("post", "/v1/{project_id}/stacks"): {"stack_name": "second", "template": TEMPLATE},
    ("post", "/v1/{project_id}/validate"): {"template": TEMPLATE},
    ("put", ONE): {"template": TEMPLATE},
    ("patch", ONE): {},
    ("post", f"{ONE}/actions"): {"check": None},
    ("patch", f"{ONE}/resources/{{resource_name}}"): {"mark_unhealthy": False},
    ("post", f"{ONE}/resources/{{resource_name}}/signal"): {},
    ("post", f"{ONE}/snapshots"): {"name": "another"},
}


async def real_values(http: aiohttp.ClientSession, base: str, cv: Converge) -> dict[str, str]:
    headers = {"X-Auth-Token": "t1"}
    body = {"stack_name": "web", "template": TEMPLATE}
    async with http.post(f"{base}/v1/p1/stacks", json=body, headers=headers) as response:
        assert response.status == 201
        stack_id = (await response.json())["stack"]["id"]
    await cv.settled(StackId(uuid.UUID(stack_id)))
    async with http.get(f"{base}/v1/p1/stacks/web/{stack_id}/events", headers=headers) as response:
        event_id = (await response.json())["events"][0]["id"]
    async with http.post(f"{base}/v1/p1/stacks/web/{stack_id}/snapshots", json={}, headers=headers) as answer:
        assert answer.status == 200
        snapshot_id = (await answer.json())["id"]
    await cv.settled(StackId(uuid.UUID(stack_id)))
    return {
        "project_id": "p1",
        "stack_identity": "web",
        "stack_name": "web",
        "stack_id": stack_id,
        "resource_name": "test",
        "output_key": "out",
        "event_id": event_id,
        "type_name": "OS::Heat::TestResource",
        "version": "heat_template_version.2016-10-14",
        "file": "app.js",
        "config_id": str(uuid.uuid4()),
        "deployment_id": str(uuid.uuid4()),
        "server_id": str(uuid.uuid4()),
        "signal_token": "A" * 43,
        "snapshot_id": snapshot_id,
    }
