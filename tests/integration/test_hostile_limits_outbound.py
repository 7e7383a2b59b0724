"""Outbound HTTP cannot be turned on this machine (M2), and a malformed redirect is a
clear permanent error (L5).

Real: `converge up` processes (tests/support/hostile.py) with their default allow-list
or a bare loopback host, Converge::HTTP::Resource stacks created over real HTTP, and a
REST API of the test's own on a free loopback port standing in for an internal service.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.fake_rest_api import FakeApi, serve
from tests.support.hostile import ALPHA, Api, start_server

pytestmark = pytest.mark.integration

TA = ALPHA[0]
HOT = "2018-08-31"


@pytest.fixture
async def internal() -> AsyncIterator[FakeApi]:
    """A loopback service Converge was never told about."""
    async with serve(FakeApi()) as running:
        yield running


async def http_stack(api: Api, url: str) -> tuple[int, Any, str]:
    """Create a stack of one Converge::HTTP::Resource posting to `url`; (status of the
    create, its body, the stack's final status or "" when refused)."""
    name = f"h{uuid.uuid4().hex[:8]}"
    properties = {"url": url, "body": {"name": "made-by-converge"}}
    template = {
        "heat_template_version": HOT,
        "resources": {"h": {"type": "Converge::HTTP::Resource", "properties": properties}},
    }
    made = await api.call(
        "POST", "/v1/alpha/stacks", token=TA, json={"stack_name": name, "template": template}
    )
    if made.status != 201:
        return made.status, made.body, ""
    return made.status, made.body, await api.until_settled("alpha", TA, name)


async def reason(api: Api, name_status: tuple[int, Any, str]) -> str:
    stack_id = name_status[1]["stack"]["id"]
    found = await api.call("GET", f"/v1/alpha/stacks/{stack_id}/resources/h", token=TA)
    if found.status == 302:
        found = await api.call("GET", found.headers["Location"].split(api.base, 1)[1], token=TA)
    return str(found.body["resource"]["resource_status_reason"])


async def test_by_default_only_the_sandbox_is_reachable(
    tmp_path: Path, database_url: str, internal: FakeApi
) -> None:
    async with start_server(tmp_path, database_url) as server, aiohttp.ClientSession() as http:
        api = Api(http, server.base)
        port = server.base.rsplit(":", 1)[1]
        for url in (
            f"{internal.base}/internal/",  # any other loopback service
            f"http://localhost:{internal.port}/internal/",
            f"http://127.0.0.1:{port}/v1/alpha/stacks",  # Converge's own API
            f"http://127.0.0.1:{port}/healthz",
            f"http://127.0.0.1:{port}/sandbox/../v1/alpha/stacks",  # climbing out of the sandbox
            f"http://127.0.0.1:{port}/sandbox/%2e%2e/v1/alpha/stacks",
        ):
            made = await http_stack(api, url)
            assert made[2] == "CREATE_FAILED", (url, made)
            assert "is not allowed for outbound HTTP" in await reason(api, made), url
        assert internal.seen == [], "nothing reached the internal service"
        sandbox = f"{server.base}/sandbox/v1/things"
        made = await http_stack(api, sandbox)
        assert made[2] == "CREATE_COMPLETE", "the sandbox is allowed: it is there to be managed"


async def test_fragments_and_user_information_cannot_change_what_was_checked(
    tmp_path: Path, database_url: str, internal: FakeApi
) -> None:
    env = {"CONVERGE_HTTP_ALLOWED_HOSTS": f"127.0.0.1:{internal.port}"}
    async with start_server(tmp_path, database_url, env=env) as server, aiohttp.ClientSession() as http:
        api = Api(http, server.base)
        for url, problem in (
            (f"{internal.base}/admin/pause#", "fragment"),
            (f"http://user:pw@127.0.0.1:{internal.port}/things", "user information"),
            (f"http://127.0.0.1:{internal.port}@10.255.255.1/things", "user information"),
        ):
            status, body, _ = await http_stack(api, url)
            assert status == 400, (url, body)
            assert problem in body["error"]["message"], body
        assert internal.seen == []


async def test_a_bare_host_still_protects_converges_own_ports(
    tmp_path: Path, database_url: str, internal: FakeApi
) -> None:
    env = {"CONVERGE_HTTP_ALLOWED_HOSTS": "127.0.0.1,localhost"}
    async with start_server(tmp_path, database_url, env=env) as server, aiohttp.ClientSession() as http:
        api = Api(http, server.base)
        port = server.base.rsplit(":", 1)[1]
        own = await http_stack(api, f"http://localhost:{port}/v1/alpha/stacks")
        assert own[2] == "CREATE_FAILED"
        assert "is not allowed for outbound HTTP" in await reason(api, own)
        allowed = await http_stack(api, f"{internal.base}/things")
        assert allowed[2] == "CREATE_COMPLETE", "an operator's bare host admits other ports"


async def test_a_redirect_to_an_unreadable_port_is_a_permanent_error_naming_it(
    tmp_path: Path, database_url: str, internal: FakeApi
) -> None:
    env = {"CONVERGE_HTTP_ALLOWED_HOSTS": f"127.0.0.1:{internal.port}"}
    async with start_server(tmp_path, database_url, env=env) as server, aiohttp.ClientSession() as http:
        api = Api(http, server.base)
        redirected = await http_stack(api, f"{internal.base}/bad-port")
        assert redirected[2] == "CREATE_FAILED"
        why = await reason(api, redirected)
        assert "invalid redirect URL" in why
        assert "99999999" in why
        assert "ValueError" not in why
        assert [s.path for s in internal.seen] == ["/bad-port"], "a permanent error: not retried"
