"""Fixtures for plugin tests: virtual time, an action-context builder, a fake API."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from shared.http_client import AllowList, HttpGateway
from tests.support.fake_rest_api import FakeApi, serve
from tests.unit.plugins.plugin_fakes import CtxFactory, VirtualClock, context_factory


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def make_ctx(clock: VirtualClock) -> CtxFactory:
    return context_factory(clock)


@pytest.fixture
async def api() -> AsyncIterator[FakeApi]:
    """The fake REST API, listening on 127.0.0.1 at a random port."""
    async with serve(FakeApi()) as running:
        yield running


@pytest.fixture
async def gateway(api: FakeApi) -> AsyncIterator[HttpGateway]:
    """A real gateway over a real aiohttp session, allowing only the fake API."""
    async with aiohttp.ClientSession() as session:
        yield HttpGateway(session, AllowList.parse(f"127.0.0.1:{api.port}"))
