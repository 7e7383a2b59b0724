"""What a Heat client finds: the version document, /healthcheck, a clear 501 for what Converge
does not implement, and a stack list that honours Heat's tags filters.

Real: the engine's HTTP app as `build_app` assembles it (the engine, worker
and observer in process over the in-process bus, PostgreSQL), served over real
HTTP on 127.0.0.1, and python-heatclient unmodified. For /healthcheck while
draining, the same app with a readiness check that says not ready.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from services.engine.api.app import build_app
from services.engine.core.model import StackId
from shared.health import Readiness, health_routes, start_http
from tests.support.convergence import Converge, converge
from tests.support.ports import free_port

pytestmark = pytest.mark.integration

TOKENS = "t1=p1,t2=p2"
TEMPLATE = {"heat_template_version": "2016-10-14", "resources": {"n": {"type": "OS::Heat::None"}}}
BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.fixture
async def api(database_url: str) -> AsyncIterator[tuple[Converge, str]]:
    async with converge(database_url, seed=0, duplicate_rate=0.0) as cv, cv.http(TOKENS) as base:
        yield cv, base


async def call(
    method: str, url: str, *, token: str | None = None, accept: str | None = None, body: Any = None
) -> tuple[int, str, str]:
    """(status, content type, body text) of one request."""
    headers = {"X-Auth-Token": token} if token else {}
    if accept is not None:
        headers["Accept"] = accept
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, url, headers=headers, json=body, allow_redirects=False) as response,
    ):
        return response.status, response.content_type, await response.text()


async def test_json_clients_get_the_version_document_at_the_root_and_browsers_the_dashboard(
    api: tuple[Converge, str],
) -> None:
    _, base = api
    document = {
        "versions": [{"id": "v1.0", "status": "CURRENT", "links": [{"rel": "self", "href": f"{base}/v1/"}]}]
    }
    status, kind, text = await call("GET", f"{base}/", accept="application/json")
    assert (status, kind) == (300, "application/json")
    assert json.loads(text) == document
    for path in ("/v1", "/v1/"):
        status, kind, text = await call("GET", f"{base}{path}")  # no token needed
        assert (status, kind, json.loads(text)) == (200, "application/json", document), path
    for accept in (BROWSER, None, "*/*", "text/html"):
        status, kind, text = await call("GET", f"{base}/", accept=accept)
        assert (status, kind) == (200, "text/html"), accept
        assert "<html" in text.lower()
    status, _, _ = await call("GET", f"{base}/v1/p1/stacks")
    assert status == 401, "everything else under /v1 still needs a token"


async def test_healthcheck_answers_as_on_heats_api_and_503_while_not_taking_work(
    api: tuple[Converge, str],
) -> None:
    cv, base = api
    assert await call("GET", f"{base}/healthcheck") == (200, "text/plain", "OK")
    status, kind, text = await call("GET", f"{base}/healthcheck", accept="application/json")
    assert (status, kind) == (200, "application/json")
    assert text.replace(" ", "").replace("\n", "") == '{"detailed":false,"reasons":["OK"]}'
    status, kind, text = await call("GET", f"{base}/healthcheck", accept="text/html")
    assert (status, kind) == (200, "text/html")
    assert "<li>OK</li>" in text
    assert (await call("HEAD", f"{base}/healthcheck"))[0] == 204

    draining = Readiness()
    draining.add("not_draining", lambda: False)
    health = health_routes(readiness=draining, registry=CollectorRegistry())
    app = build_app(health, api=cv.engine.api(), readiness=draining)
    port = free_port()
    runner = await start_http(app, host="127.0.0.1", port=port)
    try:
        other = f"http://127.0.0.1:{port}"
        assert await call("GET", f"{other}/healthcheck") == (503, "text/plain", "not ready: not_draining")
        assert (await call("HEAD", f"{other}/healthcheck"))[0] == 503
    finally:
        await runner.cleanup()


async def test_unsupported_heat_endpoints_answer_501_saying_so(api: tuple[Converge, str]) -> None:
    _, base = api
    body = {"stack_name": "s", "template": TEMPLATE}
    status, _, text = await call("POST", f"{base}/v1/p1/stacks", token="t1", body=body)
    assert status == 201, text
    for method, url, message in (
        ("GET", f"{base}/v1/p1/services", "The orchestration service list is not supported by Converge"),
    ):
        status, kind, text = await call(method, url, token="t1")
        assert (status, kind) == (501, "application/json"), (method, url, text)
        assert message in text, text
    status, _, _ = await call("GET", f"{base}/v1/p2/services", token="t1")
    assert status == 404, "another project's URL answers as before"


async def test_the_stack_list_filters_by_tags_as_heat_does(api: tuple[Converge, str]) -> None:
    cv, base = api
    ids: dict[str, str] = {}
    for name, tags in (("both", "red,big"), ("red", "red"), ("big", ["big"]), ("none", None)):
        body = {"stack_name": name, "template": TEMPLATE, **({"tags": tags} if tags else {})}
        status, _, text = await call("POST", f"{base}/v1/p1/stacks", token="t1", body=body)
        assert status == 201, text
        ids[name] = json.loads(text)["stack"]["id"]
        await cv.settled(StackId(uuid.UUID(ids[name])))

    async def listed(query: str) -> set[str]:
        status, _, text = await call("GET", f"{base}/v1/p1/stacks?{query}", token="t1")
        assert status == 200, text
        return {s["stack_name"] for s in json.loads(text)["stacks"]}

    assert await listed("tags=red,big") == {"both"}
    assert await listed("tags=red") == {"both", "red"}
    assert await listed("tags=red&tags=big") == {"both"}, "repeated, as well as comma-separated"
    assert await listed("tags_any=red,big") == {"both", "red", "big"}
    assert await listed("not_tags=red,big") == {"red", "big", "none"}
    assert await listed("not_tags_any=red,big") == {"none"}
    assert await listed("tags=nomatch") == set()
    assert await listed("tags_any=red&not_tags=big") == {"red"}
    assert await listed("tags=red&limit=1&sort_keys=stack_name&sort_dir=asc") == {"both"}

    too_many = ",".join(f"t{i}" for i in range(51))
    status, _, text = await call("GET", f"{base}/v1/p1/stacks?tags={too_many}", token="t1")
    assert status == 400
    assert "tags: at most 50 tags, got 51" in text
