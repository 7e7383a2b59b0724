"""Real `converge-worker` processes run plugin actions from RabbitMQ jobs.

Real: RabbitMQ, worker processes (started, SIGTERMed, SIGKILLed), built-in
plugins, and an HTTP API on 127.0.0.1 for Converge::HTTP::Resource. The test
plays the engine: it publishes jobs and reads results.
"""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from shared.bus import Delivery
from shared.bus.amqp import AmqpBus
from shared.messages import Codec, Message
from shared.protocol import JobAction, JobOutcome, JobResult, ResourceJob
from tests.support.fake_rest_api import FakeApi, serve
from tests.support.ports import free_port
from tests.support.processes import ServiceProcess
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

StartWorker = Callable[[], Awaitable[ServiceProcess]]


@pytest.fixture
async def start_worker(amqp_url: str, queue_prefix: str) -> AsyncIterator[StartWorker]:
    started: list[ServiceProcess] = []

    async def start() -> ServiceProcess:
        port = free_port()
        env = {
            "CONVERGE_AMQP_URL": amqp_url,
            "CONVERGE_QUEUE_PREFIX": queue_prefix,
            "CONVERGE_HEALTH_PORT": str(port),
            "CONVERGE_HTTP_ALLOWED_HOSTS": "127.0.0.1",
            "CONVERGE_PUBLIC_API_URL": "http://converge.example:8004",
        }
        process = await ServiceProcess(["converge-worker"], env).start()
        started.append(process)
        await process.wait_for_event("ready")
        process.env["port"] = str(port)
        return process

    yield start
    for process in started:
        await process.stop()


class Engine:
    """The test's stand-in for the engine: publishes jobs, collects results."""

    def __init__(self, bus: AmqpBus) -> None:
        self.bus = bus
        self.results: dict[str, JobResult] = {}

    async def handle(self, message: Message, _: Delivery) -> None:
        assert isinstance(message, JobResult)
        self.results[message.job_id] = message

    async def submit(self, resource_type: str, action: JobAction, **fields: Any) -> str:
        job = ResourceJob(
            job_id=uuid.uuid4().hex,
            stack_id="s-1",
            stack_name="demo",
            project_id="p",
            traversal_id="t-1",
            resource_id=1,
            resource_name=fields.pop("name", "res"),
            resource_type=resource_type,
            action=action,
            deadline=time.time() + fields.pop("timeout", 60),
            reply_to="results",
            **fields,
        )
        await self.bus.publish("jobs", job)
        return job.job_id

    async def run(self, resource_type: str, action: JobAction, **fields: Any) -> JobResult:
        job_id = await self.submit(resource_type, action, **fields)
        await eventually(lambda: job_id in self.results, timeout=60)
        return self.results[job_id]


@pytest.fixture
async def engine(amqp_url: str, queue_prefix: str) -> AsyncIterator[Engine]:
    bus = await AmqpBus.connect(amqp_url, prefix=queue_prefix, connection_name=f"{queue_prefix}:engine")
    engine = Engine(bus)
    sub = await bus.consume("results", engine.handle, prefetch=10, codec=Codec([JobResult]))
    yield engine
    await sub.stop()
    await bus.close()


@pytest.fixture
async def api() -> AsyncIterator[FakeApi]:
    async with serve(FakeApi()) as running:
        yield running


async def test_test_resource_lifecycle_runs_in_a_worker(start_worker: StartWorker, engine: Engine) -> None:
    await start_worker()
    created = await engine.run("OS::Heat::TestResource", JobAction.CREATE, properties={"value": "a"})
    assert created.outcome is JobOutcome.COMPLETE
    assert created.attributes["output"] == "a"
    updated = await engine.run(
        "OS::Heat::TestResource",
        JobAction.UPDATE,
        physical_id=created.physical_id,
        properties={"value": "b"},
        previous_properties={"value": "a"},
    )
    assert updated.outcome is JobOutcome.COMPLETE
    assert updated.attributes["output"] == "b"
    replace = await engine.run(
        "OS::Heat::TestResource",
        JobAction.UPDATE,
        physical_id=created.physical_id,
        properties={"value": "c", "update_replace": True},
        previous_properties={"value": "b"},
    )
    assert replace.outcome is JobOutcome.REPLACE
    deleted = await engine.run(
        "OS::Heat::TestResource", JobAction.DELETE, physical_id=created.physical_id, properties={"value": "b"}
    )
    assert deleted.outcome is JobOutcome.COMPLETE
    failed = await engine.run("OS::Heat::TestResource", JobAction.CREATE, properties={"fail": True})
    assert failed.outcome is JobOutcome.FAILED
    assert failed.reason.startswith("Resource CREATE failed")
    slow = await engine.run(
        "OS::Heat::TestResource", JobAction.CREATE, properties={"action_wait_secs": {"create": 30}}
    )
    assert slow.outcome is JobOutcome.IN_PROGRESS


async def test_simple_builtin_types_run_in_a_worker(start_worker: StartWorker, engine: Engine) -> None:
    await start_worker()
    none = await engine.run("OS::Heat::None", JobAction.CREATE, properties={"anything": [1, 2]})
    assert none.outcome is JobOutcome.COMPLETE
    assert none.physical_id
    value = await engine.run(
        "OS::Heat::Value", JobAction.CREATE, properties={"value": {"k": 1}, "type": "json"}
    )
    assert value.attributes["value"] == {"k": 1}
    random_string = await engine.run("OS::Heat::RandomString", JobAction.CREATE, properties={"length": 12})
    assert len(random_string.attributes["value"]) == 12
    handle = await engine.run("OS::Heat::WaitConditionHandle", JobAction.CREATE, name="h")
    assert (
        handle.attributes["endpoint"]
        == "http://converge.example:8004/v1/p/stacks/demo/s-1/resources/h/signal"
    )
    assert handle.attributes["token"]
    waiting = await engine.run(
        "OS::Heat::WaitCondition", JobAction.CREATE, properties={"handle": handle.physical_id, "timeout": 60}
    )
    assert waiting.outcome is JobOutcome.IN_PROGRESS, "the engine completes it from the handle's signals"
    unknown = await engine.run("No::Such::Type", JobAction.CREATE)
    assert unknown.outcome is JobOutcome.FAILED
    assert "unknown resource type 'No::Such::Type'" in unknown.reason
    invalid = await engine.run("OS::Heat::RandomString", JobAction.CREATE, properties={"length": "long"})
    assert invalid.outcome is JobOutcome.FAILED
    assert "properties.length" in invalid.reason


async def test_http_resource_runs_in_a_worker(
    start_worker: StartWorker, engine: Engine, api: FakeApi
) -> None:
    await start_worker()
    url = f"{api.base}/things"
    created = await engine.run(
        "Converge::HTTP::Resource", JobAction.CREATE, properties={"url": url, "body": {"n": 1}}
    )
    assert created.outcome is JobOutcome.COMPLETE
    assert created.physical_id in api.items
    api.create_status = "BUILD"
    building = await engine.run(
        "Converge::HTTP::Resource", JobAction.CREATE, properties={"url": url, "status_field": "status"}
    )
    assert building.outcome is JobOutcome.IN_PROGRESS
    refused = await engine.run(
        "Converge::HTTP::Resource", JobAction.CREATE, properties={"url": f"{api.base}/bad"}
    )
    assert refused.outcome is JobOutcome.FAILED
    assert "name is required" in refused.reason
    gone = await engine.run(
        "Converge::HTTP::Resource", JobAction.DELETE, physical_id="it-404", properties={"url": url}
    )
    assert gone.outcome is JobOutcome.COMPLETE
    forbidden = await engine.run(
        "Converge::HTTP::Resource", JobAction.CREATE, properties={"url": "http://10.1.2.3/things"}
    )
    assert forbidden.outcome is JobOutcome.FAILED
    assert "CONVERGE_HTTP_ALLOWED_HOSTS" in forbidden.reason
    assert not any(s.path.startswith("/10.") for s in api.seen)


async def test_a_job_redelivered_after_its_worker_is_killed_creates_no_duplicate(
    start_worker: StartWorker, engine: Engine, api: FakeApi
) -> None:
    doomed = await start_worker()
    api.create_gate = asyncio.Event()
    job_id = await engine.submit(
        "Converge::HTTP::Resource", JobAction.CREATE, properties={"url": f"{api.base}/things"}
    )
    await eventually(lambda: api.posts_started == 1)
    doomed.signal(signal.SIGKILL)
    await doomed.wait()
    await start_worker()
    await eventually(lambda: api.posts_started == 2)  # the job was delivered again
    api.create_gate.set()
    await eventually(lambda: job_id in engine.results)
    result = engine.results[job_id]
    assert result.outcome is JobOutcome.COMPLETE
    assert list(api.items) == [result.physical_id]


async def test_sigterm_lets_the_running_job_finish_then_exits_0(
    start_worker: StartWorker, engine: Engine, api: FakeApi
) -> None:
    worker = await start_worker()
    async with aiohttp.ClientSession() as http:
        base = f"http://127.0.0.1:{worker.env['port']}"
        async with http.get(f"{base}/healthz") as health, http.get(f"{base}/readyz") as ready:
            assert health.status == 200
            assert ready.status == 200
        api.create_gate = asyncio.Event()
        job_id = await engine.submit(
            "Converge::HTTP::Resource", JobAction.CREATE, properties={"url": f"{api.base}/things"}
        )
        await eventually(lambda: api.posts_started == 1)
        worker.signal(signal.SIGTERM)
        await worker.wait_for_event("draining")
        async with http.get(f"{base}/readyz") as ready:
            assert ready.status == 503
        api.create_gate.set()
        assert await worker.wait() == 0
    await eventually(lambda: job_id in engine.results)
    assert engine.results[job_id].outcome is JobOutcome.COMPLETE
    assert len(api.items) == 1
