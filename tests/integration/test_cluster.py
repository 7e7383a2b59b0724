"""The services run as a cluster of processes: launched from deploy/Procfile, scaled at runtime.

Real: the `make cluster` launcher (deploy/cluster.py) and honcho, the console
scripts as OS processes, PostgreSQL, RabbitMQ, the HTTP API with the token
the launcher printed (and the `converge` CLI with the credentials.json it
wrote), `make cluster-clean` (the launcher's --clean), and real signals. The scaling test starts processes
itself (tests/support/processes.py) and manages a REST API on 127.0.0.1
through Converge::HTTP::Resource, whose items are the real world it checks.
The sandbox joins the cluster once `converge-sandbox` is installed.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aio_pika
import aiohttp
import asyncpg
import pytest

from tests.support.cluster import LAUNCHER, PORT_STEP, LaunchedCluster, free_base_port
from tests.support.deploy_files import procfile
from tests.support.fake_rest_api import FakeApi, serve
from tests.support.ports import free_port
from tests.support.processes import BIN, ServiceProcess
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


async def call(http: aiohttp.ClientSession, method: str, url: str, token: str, body: Any = None) -> Any:
    async with http.request(method, url, json=body, headers={"X-Auth-Token": token}) as response:
        assert response.status < 300, f"{method} {url}: {response.status} {await response.text()}"
        return await response.json()


async def create_and_wait(base: str, token: str, name: str, template: dict[str, Any]) -> list[Any]:
    """Create a stack through the API; wait (bounded) until it leaves CREATE_IN_PROGRESS;
    return its resources."""
    async with aiohttp.ClientSession() as http:
        created = await call(
            http, "POST", f"{base}/stacks", token, {"stack_name": name, "template": template}
        )
        stack_url = f"{base}/stacks/{name}/{created['stack']['id']}"
        async with asyncio.timeout(60):
            while True:
                stack = (await call(http, "GET", stack_url, token))["stack"]
                if stack["stack_status"] != "CREATE_IN_PROGRESS":
                    break
                await asyncio.sleep(0.1)
        assert (stack["stack_status"], stack["stack_status_reason"]) == (
            "CREATE_COMPLETE",
            "Stack CREATE completed successfully",
        )
        resources: list[Any] = (await call(http, "GET", f"{stack_url}/resources", token))["resources"]
        return resources


def chained_test_resources(count: int) -> dict[str, Any]:
    """`count` TestResources, in chains of five; every fourth finishes asynchronously,
    so an observer reports it done."""
    resources: dict[str, Any] = {}
    for i in range(count):
        properties: dict[str, Any] = {"value": f"v{i}"}
        if i >= 5:
            properties["value"] = {"get_attr": [f"r{i - 5}", "output"]}
        if i % 4 == 0:
            properties["action_wait_secs"] = {"create": 0.2}
        resources[f"r{i}"] = {"type": "OS::Heat::TestResource", "properties": properties}
    return {"heat_template_version": "2018-08-31", "resources": resources}


async def health(port: int) -> dict[str, int]:
    async with aiohttp.ClientSession(f"http://127.0.0.1:{port}") as http:
        statuses = {}
        for path in ("/healthz", "/readyz", "/metrics"):
            async with http.get(path) as response:
                statuses[path] = response.status
        return statuses


# honcho exits with 128 + the signal's number after stopping every process.
@pytest.mark.timeout(120)
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
async def test_the_procfile_cluster_comes_up_converges_a_stack_and_stops_cleanly(
    stop: signal.Signals, database_url: str, amqp_url: str, queue_prefix: str, tmp_path: Path
) -> None:
    counts = {"engine": 1, "worker": 2, "observer": 1, "sandbox": 1}
    names = list(procfile())
    base = free_base_port(len(names), 2)
    cluster = LaunchedCluster(
        [
            *("--engines", "1", "--workers", "2", "--observers", "1", "--sandboxes", str(counts["sandbox"])),
            *("--port", str(base), "--database-url", database_url, "--amqp-url", amqp_url),
            *("--queue-prefix", queue_prefix, "--data-dir", str(tmp_path)),
        ],
        {"CONVERGE_API_TOKENS": ""},  # the launcher generates and prints one
    )
    await cluster.start()
    try:
        ports = {
            f"{kind}.{i + 1}": base + PORT_STEP * names.index(kind) + i
            for kind, count in counts.items()
            for i in range(count)
        }
        await cluster.wait_ready(list(ports))
        for process, port in ports.items():
            assert await health(port) == {"/healthz": 200, "/readyz": 200, "/metrics": 200}, process
        exported = next(line for line in cluster.preamble if "export CONVERGE_URL=" in line)
        settings = dict(re.findall(r"(CONVERGE_\w+)=(\S+)", exported))
        assert settings["CONVERGE_URL"] == f"http://127.0.0.1:{base}"
        stored = json.loads((tmp_path / "credentials.json").read_text())
        assert stored == {
            "token": settings["CONVERGE_TOKEN"],
            "project_id": "demo",
            "url": settings["CONVERGE_URL"],
        }
        assert stored["token"][0].isalnum(), "a token never starts with '-'"
        sandbox_url = f"http://127.0.0.1:{ports.get('sandbox.1')}"

        api = f"{settings['CONVERGE_URL']}/v1/{settings['CONVERGE_PROJECT']}"
        template = chained_test_resources(20)
        if counts["sandbox"]:  # a resource in the sandbox cloud, through CONVERGE_SANDBOX_URL
            thing = {
                "type": "Sandbox::Thing",
                "properties": {"name": "from-the-cluster", "build_seconds": 0.2},
            }
            template["resources"]["thing"] = thing
        resources = await create_and_wait(api, settings["CONVERGE_TOKEN"], "cluster", template)
        assert sorted(r["resource_name"] for r in resources) == sorted(template["resources"])
        listed = await converge_cli(["stack", "list", "-f", "value", "-c", "Stack Name"], tmp_path)
        assert listed == "cluster", "the CLI finds the cluster's URL and token in credentials.json"
        assert {r["resource_status"] for r in resources} == {"CREATE_COMPLETE"}
        jobs = [e for w in ("worker.1", "worker.2") for e in cluster.logged(w, "job_started")]
        assert len({e["resource"] for e in jobs}) == len(template["resources"]), (
            "the workers ran every create"
        )
        assert cluster.logged("observer.1", "settled"), "the observer finished the asynchronous ones"
        if counts["sandbox"]:
            async with aiohttp.ClientSession() as http, http.get(f"{sandbox_url}/v1/inventory") as response:
                inventory = await response.json()
            (made,) = [r for r in resources if r["resource_name"] == "thing"]
            assert [r["id"] for r in inventory["resources"]] == [made["physical_resource_id"]]

        cluster.signal(stop)  # SIGINT is what Ctrl-C on `make cluster` sends
        assert await cluster.wait() == 128 + stop, cluster.output()
        assert cluster.exit_codes == dict.fromkeys(ports, 0), cluster.output()
        for process in ports:
            assert cluster.logged(process, "stopped"), f"{process} drained and stopped"
    finally:
        await cluster.stop()


@pytest.fixture
async def api() -> AsyncIterator[FakeApi]:
    async with serve(FakeApi()) as running:
        yield running


def http_things(api: FakeApi, count: int) -> dict[str, Any]:
    resources = {
        f"thing{i}": {
            "type": "Converge::HTTP::Resource",
            "properties": {"url": f"{api.base}/things", "body": {"_name": f"thing{i}"}},
        }
        for i in range(count)
    }
    return {"heat_template_version": "2018-08-31", "resources": resources}


async def converge_cli(argv: list[str], data_dir: Path) -> str:
    """The `converge` CLI with nothing but CONVERGE_DATA_DIR to go by; its output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVERGE_")}
    process = await asyncio.create_subprocess_exec(
        str(BIN / "converge"),
        *argv,
        env={**env, "CONVERGE_DATA_DIR": str(data_dir)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out.decode().strip()


async def clean(database_url: str, amqp_url: str, queue_prefix: str) -> tuple[int, str]:
    """`make cluster-clean` for this cluster: exit code and output."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(LAUNCHER),
        *("--clean", "--database-url", database_url, "--amqp-url", amqp_url, "--queue-prefix", queue_prefix),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    async with asyncio.timeout(60):
        out, _ = await process.communicate()
    return process.returncode or 0, out.decode()


async def leftovers(database_url: str, amqp_url: str, queue_prefix: str) -> tuple[bool, list[str]]:
    """Whether the cluster's database exists, and which of its queues do."""
    parts = urlsplit(database_url)
    conn = await asyncpg.connect(urlunsplit(parts._replace(path="/postgres")))
    try:
        database = bool(await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", parts.path[1:]))
    finally:
        await conn.close()
    present = []
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        for queue in ("engine", "jobs", "observe", "notifications.sandbox"):
            channel = await connection.channel()
            try:
                await channel.declare_queue(f"{queue_prefix}.{queue}", passive=True)
                present.append(queue)
            except aio_pika.exceptions.ChannelClosed:
                pass
    return database, present


@pytest.mark.timeout(120)
async def test_cluster_clean_removes_the_database_and_queues_but_not_from_under_a_running_cluster(
    database_url: str, amqp_url: str, queue_prefix: str, tmp_path: Path
) -> None:
    names = list(procfile())
    base = free_base_port(len(names), 1)
    cluster = LaunchedCluster(
        [
            *("--engines", "1", "--workers", "1", "--observers", "1", "--sandboxes", "1"),
            *("--port", str(base), "--database-url", database_url, "--amqp-url", amqp_url),
            *("--queue-prefix", queue_prefix, "--data-dir", str(tmp_path)),
        ],
        {"CONVERGE_API_TOKENS": ""},
    )
    await cluster.start()
    try:
        await cluster.wait_ready(["engine.1", "worker.1", "observer.1", "sandbox.1"])
        assert await leftovers(database_url, amqp_url, queue_prefix) == (
            True,
            ["engine", "jobs", "observe", "notifications.sandbox"],
        )
        code, out = await clean(database_url, amqp_url, queue_prefix)
        assert code == 2, out
        assert "is in use: stop the cluster first" in out
        assert (await leftovers(database_url, amqp_url, queue_prefix))[0], "nothing removed from under it"
        cluster.signal(signal.SIGINT)
        await cluster.wait()
    finally:
        await cluster.stop()
    code, out = await clean(database_url, amqp_url, queue_prefix)
    assert code == 0, out
    assert await leftovers(database_url, amqp_url, queue_prefix) == (False, [])
    assert (await clean(database_url, amqp_url, queue_prefix))[0] == 0, "cleaning twice is fine"


def resources_in(process: ServiceProcess, event: str) -> set[str]:
    return {e["resource"] for e in process.events if e.get("event") == event}


@pytest.mark.timeout(120)
async def test_an_added_worker_takes_jobs_at_once_and_a_stopped_one_loses_nothing(
    database_url: str, amqp_url: str, queue_prefix: str, api: FakeApi
) -> None:
    common = {"CONVERGE_AMQP_URL": amqp_url, "CONVERGE_QUEUE_PREFIX": queue_prefix}
    api_port = free_port()
    engine = ServiceProcess(
        ["converge-engine"],
        {
            **common,
            "CONVERGE_DATABASE_URL": database_url,
            "CONVERGE_API_PORT": str(api_port),
            "CONVERGE_API_TOKENS": "secret=p1",
        },
    )

    def worker() -> ServiceProcess:
        return ServiceProcess(
            ["converge-worker"],
            {
                **common,
                "CONVERGE_HEALTH_PORT": str(free_port()),
                "CONVERGE_HTTP_ALLOWED_HOSTS": "127.0.0.1",
                "CONVERGE_WORKER_CONCURRENCY": "3",
                "CONVERGE_DRAIN_SECONDS": "1",
            },
        )

    first, added = worker(), worker()
    started: list[ServiceProcess] = []
    try:
        for process in (engine, first):
            started.append(await process.start())
        for process in started:
            await process.wait_for_event("ready")
        api.create_gate = asyncio.Event()  # every create hangs until released
        creating = asyncio.create_task(
            create_and_wait(f"http://127.0.0.1:{api_port}/v1/p1", "secret", "things", http_things(api, 12))
        )
        await eventually(lambda: api.posts_started == 3)  # the first worker is full; 9 jobs wait

        started.append(await added.start())
        await added.wait_for_event("ready")
        await eventually(lambda: api.posts_started == 6)
        await eventually(lambda: len(resources_in(added, "job_started")) == 3)  # took waiting jobs at once

        first.signal(signal.SIGTERM)  # mid-operation: three of its creates are in flight
        assert await first.wait() == 0
        assert any(e.get("event") == "drain_timeout" for e in first.events), "it stopped with jobs running"
        abandoned = resources_in(first, "job_started")
        assert len(abandoned) == 3
        assert not resources_in(first, "job_finished")

        api.create_gate.set()
        resources = await creating
        assert {r["resource_status"] for r in resources} == {"CREATE_COMPLETE"}
        assert sorted(item["_name"] for item in api.items.values()) == sorted(f"thing{i}" for i in range(12))
        assert len(api.created) == 12, "every resource created exactly once"
        everything = {f"thing{i}" for i in range(12)}
        await eventually(lambda: resources_in(added, "job_finished") == everything)
        assert abandoned <= resources_in(added, "job_started"), "the stopped worker's jobs went to the other"
    finally:
        for process in started:
            await process.stop()
