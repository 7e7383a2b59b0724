"""The sandbox agent's polling and signalling (services/sandbox/agent.py `Agents`): it reads
its server's metadata with its own token, runs each waiting config once, signals the result,
and runs and signals again when a signal did not get through.
Faked: Converge's API, as a small aiohttp app on 127.0.0.1 (the HTTP seam the agent uses)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from services.sandbox.agent import Agent, Agents
from shared.health import start_http
from tests.support.ports import free_port
from tests.support.waiting import eventually

TOKEN = "a" * 48


def item(config_id: str, status: str, transport: str = "HEAT_SIGNAL") -> dict[str, Any]:
    inputs = {
        "deploy_stack_id": "web/1",
        "deploy_resource_name": f"deploy-{config_id}",
        "deploy_signal_transport": transport,
    }
    return {
        "id": config_id,
        "config": "#sandbox: stdout done\n",
        "inputs": [{"name": k, "value": v} for k, v in inputs.items()],
        "deployment_id": f"d-{config_id}",
        "deployment_status": status,
    }


class FakeApi:
    def __init__(self) -> None:
        self.metadata = [
            item("c1", "IN_PROGRESS"),
            item("c2", "COMPLETE"),
            item("c3", "COMPLETE", "NO_SIGNAL"),
        ]
        self.answers = [503, 200]  # the first signal fails, the second gets through
        self.signals: list[tuple[str, dict[str, Any]]] = []
        self.tokens: set[str] = set()

    async def get_metadata(self, request: web.Request) -> web.Response:
        self.tokens.add(request.headers.get("X-Auth-Token", ""))
        return web.json_response({"metadata": self.metadata})

    async def signal(self, request: web.Request) -> web.Response:
        self.signals.append((request.match_info["name"], await request.json()))
        return web.Response(status=self.answers.pop(0) if self.answers else 200)


@pytest.fixture
async def api() -> AsyncIterator[tuple[FakeApi, str]]:
    fake = FakeApi()
    app = web.Application()
    app.add_routes(
        [
            web.get("/v1/p/software_deployments/metadata/{server}", fake.get_metadata),
            web.post("/v1/p/stacks/web/1/resources/{name}/signal", fake.signal),
        ]
    )
    port = free_port()
    runner = await start_http(app, host="127.0.0.1", port=port)
    yield fake, f"http://127.0.0.1:{port}/v1/p"
    await runner.cleanup()


async def test_a_waiting_config_is_run_and_signalled_again_until_its_signal_gets_through(
    api: tuple[FakeApi, str],
) -> None:
    fake, base = api
    agents = Agents(poll_seconds=0.02)
    agents.set("s1", Agent(base, TOKEN))
    task = asyncio.create_task(agents.run(lambda _server: True))
    try:
        await eventually(lambda: len(fake.signals) >= 2, timeout=10)
        await asyncio.sleep(0.2)  # ten more polls: nothing more is signalled
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert fake.tokens == {TOKEN}
    assert [name for name, _ in fake.signals] == ["deploy-c1", "deploy-c1"], "only the waiting config"
    assert fake.signals[-1][1] == {"deploy_stdout": "done\n", "deploy_stderr": "", "deploy_status_code": 0}


async def test_an_inactive_server_does_not_poll(api: tuple[FakeApi, str]) -> None:
    fake, base = api
    agents = Agents(poll_seconds=0.02)
    agents.set("s1", Agent(base, TOKEN))
    task = asyncio.create_task(agents.run(lambda _server: False))
    await asyncio.sleep(0.2)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert fake.tokens == set()
