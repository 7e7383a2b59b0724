"""Observers as real processes: notifications handled once, watches survive a dead observer,
and the admin endpoint pauses, resumes and shows what an observer is watching.

Real: PostgreSQL, RabbitMQ, `converge-sandbox` (publishing change notifications
on the bus), a `converge-engine`, a `converge-worker` and two
`converge-observer` processes; the stack is created through the HTTP API.
"""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest

from tests.support.ports import free_port
from tests.support.processes import ServiceProcess
from tests.support.sandbox import RunningSandbox, SandboxClient, start_sandbox
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

TOKEN = "t1"


@dataclass
class Cluster:
    sandbox: RunningSandbox
    engine: ServiceProcess
    api: str
    observers: dict[str, tuple[ServiceProcess, str]]  # name -> (process, health base URL)
    http: aiohttp.ClientSession

    @property
    def cloud(self) -> SandboxClient:
        return SandboxClient(self.http, self.sandbox.url)

    async def admin(self, observer: str, method: str, path: str) -> tuple[int, Any]:
        async with self.http.request(method, f"{self.observers[observer][1]}{path}") as response:
            return response.status, await response.json()

    async def stack_status(self, stack_id: str) -> str:
        headers = {"X-Auth-Token": TOKEN}
        async with self.http.get(f"{self.api}/v1/p1/stacks/slow/{stack_id}", headers=headers) as response:
            body = await response.json()
            return str(body["stack"]["stack_status"])


@pytest.fixture
async def cluster(database_url: str, amqp_url: str, queue_prefix: str) -> AsyncIterator[Cluster]:
    common = {"CONVERGE_AMQP_URL": amqp_url, "CONVERGE_QUEUE_PREFIX": queue_prefix}
    sandbox = await start_sandbox({**common, "CONVERGE_SANDBOX_LATENCY": "0.2"})
    plugins = {**common, "CONVERGE_SANDBOX_URL": sandbox.url}
    api_port = free_port()
    engine_env = {
        **common,
        "CONVERGE_DATABASE_URL": database_url,
        "CONVERGE_API_PORT": str(api_port),
        "CONVERGE_API_TOKENS": f"{TOKEN}=p1",
    }
    ports = {name: free_port() for name in ("a", "b")}
    specs = {
        "engine": (["converge-engine"], engine_env),
        "worker": (["converge-worker"], {**plugins, "CONVERGE_HEALTH_PORT": str(free_port())}),
        **{
            f"observer-{name}": (["converge-observer"], {**plugins, "CONVERGE_HEALTH_PORT": str(port)})
            for name, port in ports.items()
        },
    }
    processes = {name: await ServiceProcess(argv, env).start() for name, (argv, env) in specs.items()}
    try:
        for process in processes.values():
            await process.wait_for_event("ready", timeout=90)
        async with aiohttp.ClientSession() as http:
            yield Cluster(
                sandbox,
                processes["engine"],
                f"http://127.0.0.1:{api_port}",
                {n: (processes[f"observer-{n}"], f"http://127.0.0.1:{p}") for n, p in ports.items()},
                http,
            )
    finally:
        for process in processes.values():
            await process.stop()
        await sandbox.process.stop()


def notifications_seen(process: ServiceProcess) -> list[str]:
    return [e["notification_id"] for e in process.events if e.get("event") == "notification"]


async def published(cloud: SandboxClient) -> int:
    """How many notifications the sandbox has published (its own metric)."""
    async with cloud.http.get(f"{cloud.url}/metrics") as response:
        text = await response.text()
    lines = [line for line in text.splitlines() if line.startswith("converge_sandbox_notifications_total")]
    return sum(int(float(line.split()[-1])) for line in lines if 'outcome="published"' in line)


async def test_a_notification_burst_is_handled_once_by_one_of_two_observers(cluster: Cluster) -> None:
    ids = [
        (await cluster.cloud.ok("POST", "/things", {"name": f"t{i}", "data": {"i": i}}))["id"]
        for i in range(30)
    ]
    for thing in ids:  # out-of-band edits and deletes: more notifications
        await cluster.cloud.ok("PATCH", f"/things/{thing}", {"name": "renamed"})
        await cluster.cloud.ok("DELETE", f"/things/{thing}")
    processes = [process for process, _ in cluster.observers.values()]

    async def all_handled() -> Counter[str] | None:
        # The sandbox may still publish (more than the 90 above): a moment counts only if
        # what it had published is the same before and after the observers' logs are read.
        before = await published(cluster.cloud)
        seen = Counter(n for p in processes for n in notifications_seen(p))
        settled = before >= 90 and len(seen) == before == await published(cluster.cloud)
        return seen if settled else None

    seen = await eventually(all_handled, timeout=60, every=0.1)
    assert max(seen.values()) == 1, "no notification handled twice"
    assert all(notifications_seen(p) for p in processes), "both observers took a share"


async def test_a_watch_moves_to_the_other_observer_when_its_observer_dies(cluster: Cluster) -> None:
    # b takes nothing new while paused: the watch goes to a.
    status, state = await cluster.admin("b", "POST", "/admin/pause")
    assert (status, state["paused"]) == (200, True)
    async with cluster.http.get(f"{cluster.observers['b'][1]}/readyz") as response:
        assert response.status == 503

    template = {
        "heat_template_version": "2016-10-14",
        "resources": {
            "slow": {"type": "Sandbox::Thing", "properties": {"name": "slow", "build_seconds": 15}}
        },
    }
    headers = {"X-Auth-Token": TOKEN}
    body = {"stack_name": "slow", "template": template}
    async with cluster.http.post(f"{cluster.api}/v1/p1/stacks", json=body, headers=headers) as response:
        assert response.status == 201, await response.text()
        stack_id = (await response.json())["stack"]["id"]

    async def watched_by_a() -> list[dict[str, Any]] | None:
        _, listing = await cluster.admin("a", "GET", "/admin/observing")
        return listing["watching"] or None

    (watch,) = await eventually(watched_by_a, timeout=60, every=0.1)
    assert watch["resource_name"] == "slow"
    assert watch["action"] == "create"
    assert (await cluster.admin("b", "GET", "/admin/observing"))[1] == {"watching": []}

    await cluster.admin("b", "POST", "/admin/resume")
    cluster.observers["a"][0].signal(signal.SIGKILL)  # mid-BUILD

    async def complete() -> str | None:
        status = await cluster.stack_status(stack_id)
        assert not status.endswith("FAILED"), status
        return status if status == "CREATE_COMPLETE" else None

    await eventually(complete, timeout=120, every=0.1)
    b = cluster.observers["b"][0]
    assert any(e.get("event") == "settled" and e.get("resource") == "slow" for e in b.events), (
        "the surviving observer finished the watch"
    )
    (thing,) = [r for r in await cluster.cloud.inventory() if r["name"] == "slow"]
    assert thing["status"] == "ACTIVE"
