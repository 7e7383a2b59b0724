"""The engine's gateway to Keystone: one call per new token however many ask at once, answers
believed for the cache time (a revoked token too, until then), Converge's own expired login
replaced unnoticed, and a Keystone that cannot be asked answered 503, never 401.

Real: a Keystone (tests/support/keystone.py), aiohttp to it (its calls counted through
aiohttp's own request tracing), and for the HTTP test the engine's app over real HTTP with
PostgreSQL behind it. Nothing is faked.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from services.engine.api.app import build_app
from services.engine.api.auth import Principal, Tokens
from services.engine.api.keystone import KeystoneAuthenticator, KeystoneConfig, KeystoneUnavailable
from shared.health import Readiness, health_routes, start_http
from tests.support.convergence import converge
from tests.support.keystone import SERVICE_PASSWORD, SERVICE_USER, Keystone
from tests.support.ports import free_port

pytestmark = pytest.mark.integration


def config(url: str, *, password: str = SERVICE_PASSWORD, cache_seconds: float = 300) -> KeystoneConfig:
    return KeystoneConfig(
        url=url,
        cache_seconds=cache_seconds,
        cache_size=100,
        timeout_seconds=10,
        auth={
            "identity": {
                "methods": ["password"],
                "password": {
                    "user": {"name": SERVICE_USER, "domain": {"name": "Default"}, "password": password}
                },
            },
            "scope": {"project": {"name": "service", "domain": {"name": "Default"}}},
        },
    )


class Calls:
    """Every call the gateway makes, seen through aiohttp's request tracing."""

    def __init__(self) -> None:
        self.count: Counter[str] = Counter()
        self.service_tokens: list[str] = []

    def trace(self) -> aiohttp.TraceConfig:
        trace = aiohttp.TraceConfig()

        async def started(_: Any, __: Any, params: aiohttp.TraceRequestStartParams) -> None:
            self.count[params.method] += 1
            if "X-Subject-Token" in params.headers:
                self.service_tokens.append(params.headers["X-Auth-Token"])

        trace.on_request_start.append(started)
        return trace


@asynccontextmanager
async def gateway(keystone_config: KeystoneConfig) -> AsyncIterator[tuple[KeystoneAuthenticator, Calls]]:
    calls = Calls()
    async with aiohttp.ClientSession(trace_configs=[calls.trace()]) as session:
        yield KeystoneAuthenticator(session=session, config=keystone_config), calls


async def in_thread(call: Callable[[], Any]) -> Any:
    return await asyncio.to_thread(call)


async def test_many_requests_with_one_new_token_make_one_keystone_call(keystone: Keystone) -> None:
    alice = await in_thread(lambda: keystone.token("alice"))
    async with gateway(config(keystone.url)) as (auth, calls):
        principals = await asyncio.gather(*(auth.authenticate(alice) for _ in range(10)))
        assert set(principals) == {Principal(keystone.projects["alpha"])}
        assert await auth.authenticate(alice) == Principal(keystone.projects["alpha"])
    assert calls.count == {"POST": 1, "GET": 1}  # one login, one validation


async def test_a_revoked_token_is_believed_until_the_cache_time_is_over(keystone: Keystone) -> None:
    bob = await in_thread(lambda: keystone.token("bob"))
    beta = Principal(keystone.projects["beta"])
    async with (
        gateway(config(keystone.url)) as (cached, _),
        gateway(config(keystone.url, cache_seconds=0)) as (
            uncached,
            _,
        ),
    ):
        assert await cached.authenticate(bob) == beta
        assert await uncached.authenticate(bob) == beta
        await in_thread(lambda: keystone.revoke(bob))
        assert await cached.authenticate(bob) == beta  # the documented price of the cache
        assert await uncached.authenticate(bob) is None


async def test_converges_own_login_is_renewed_when_keystone_stops_accepting_it(keystone: Keystone) -> None:
    alice, rita = await in_thread(lambda: (keystone.token("alice"), keystone.token("rita")))
    async with gateway(config(keystone.url)) as (auth, calls):
        assert await auth.authenticate(alice) is not None
        await in_thread(lambda: keystone.revoke(calls.service_tokens[0]))
        assert await auth.authenticate(rita) == Principal(keystone.projects["alpha"], read_only=True)
    assert calls.count["POST"] == 2  # logged in again, and the caller never knew
    assert calls.service_tokens[-1] != calls.service_tokens[0]


async def test_refused_service_credentials_or_no_keystone_mean_unavailable_not_unauthorized(
    keystone: Keystone,
) -> None:
    alice = await in_thread(lambda: keystone.token("alice"))
    async with gateway(config(keystone.url, password="wrong")) as (auth, _):
        with pytest.raises(KeystoneUnavailable):
            await auth.authenticate(alice)
    async with gateway(config(f"http://127.0.0.1:{free_port()}/v3")) as (auth, _):
        with pytest.raises(KeystoneUnavailable):
            await auth.authenticate(alice)


async def test_without_keystone_a_request_is_503_in_heats_shape_but_static_and_handle_tokens_work(
    database_url: str,
) -> None:
    async with (
        converge(database_url, seed=0, duplicate_rate=0.0) as harness,
        gateway(config(f"http://127.0.0.1:{free_port()}/v3")) as (auth, _),
    ):
        health = health_routes(readiness=Readiness(), registry=CollectorRegistry())
        app = build_app(health, api=harness.engine.api(), tokens=Tokens.parse("ops=p1:admin"), keystone=auth)
        port = free_port()
        runner = await start_http(app, host="127.0.0.1", port=port)
        try:
            async with aiohttp.ClientSession() as http:
                url = f"http://127.0.0.1:{port}/v1/p1/stacks"
                async with http.get(url, headers={"X-Auth-Token": "gAAAAABsomeKeystoneToken"}) as r:
                    assert r.status == 503
                    body = await r.json()
                assert body["code"] == 503
                assert body["title"] == "Service Unavailable"
                assert "Keystone cannot be asked" in body["error"]["message"]
                async with http.get(url, headers={"X-Auth-Token": "ops"}) as r:
                    assert r.status == 200
                # A handle-shaped token signalling is the signal handler's to judge, never Keystone's.
                signal = f"{url}/s/{uuid.uuid4()}/resources/handle/signal"
                async with http.post(signal, json={}, headers={"X-Auth-Token": "a" * 48}) as r:
                    assert r.status == 401
        finally:
            await runner.cleanup()
