"""Sandbox::* types run by real worker and observer processes against a real sandbox:
create (in progress, then settled by the observer), update in place, replacement needed,
delete, and a redelivered create that makes no duplicate.
Real: RabbitMQ, `converge-sandbox`, `converge-worker` and `converge-observer` processes
configured only with CONVERGE_SANDBOX_URL (no allow-list). The test plays the engine."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from shared.bus import Delivery
from shared.bus.amqp import AmqpBus
from shared.messages import Codec, Message
from shared.protocol import JobAction, JobOutcome, JobResult, ObserveRequest, ResourceJob
from tests.support.ports import free_port
from tests.support.processes import ServiceProcess
from tests.support.sandbox import RunningSandbox, SandboxClient, start_sandbox
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


class Engine:
    """The test's stand-in for the engine: sends jobs, hands in-progress ones to the observer."""

    def __init__(self, bus: AmqpBus) -> None:
        self.bus = bus
        self.results: dict[str, JobResult] = {}  # by `<job>:result` and `<job>:observed`

    async def handle(self, message: Message, _: Delivery) -> None:
        assert isinstance(message, JobResult)
        job_id, reporter = message.id.split(":")[:2]  # a settled result's id also names its resource
        self.results[f"{job_id}:{reporter}"] = message

    def job(self, resource_type: str, action: JobAction, **fields: Any) -> ResourceJob:
        return ResourceJob(
            job_id=fields.pop("job_id", uuid.uuid4().hex),
            stack_id="s-1",
            stack_name="web",
            project_id="p",
            traversal_id="t-1",
            resource_id=1,
            resource_name=fields.pop("name", "res"),
            resource_type=resource_type,
            action=action,
            deadline=time.time() + 60,
            reply_to="results",
            **fields,
        )

    async def result(self, message_id: str) -> JobResult:
        await eventually(lambda: message_id in self.results, timeout=60)
        return self.results[message_id]

    async def run(self, job: ResourceJob) -> JobResult:
        """The worker's result; an in-progress one is finished by the observer, as the engine does."""
        await self.bus.publish("jobs", job)
        result = await self.result(f"{job.job_id}:result")
        if result.outcome is not JobOutcome.IN_PROGRESS:
            return result
        watched = job.model_copy(update={"physical_id": result.physical_id or job.physical_id})
        await self.bus.publish("observe", ObserveRequest(job=watched))
        return await self.result(f"{job.job_id}:observed")


@pytest.fixture
async def sandbox() -> AsyncIterator[RunningSandbox]:
    running = await start_sandbox({"CONVERGE_SANDBOX_LATENCY": "0.3", "CONVERGE_AMQP_URL": ""})
    yield running
    await running.process.stop()


@pytest.fixture
async def services(amqp_url: str, queue_prefix: str, sandbox: RunningSandbox) -> AsyncIterator[None]:
    started: list[ServiceProcess] = []
    for script in ("converge-worker", "converge-observer"):
        env = {
            "CONVERGE_AMQP_URL": amqp_url,
            "CONVERGE_QUEUE_PREFIX": queue_prefix,
            "CONVERGE_HEALTH_PORT": str(free_port()),
            "CONVERGE_SANDBOX_URL": sandbox.url,
            "CONVERGE_HTTP_ALLOWED_HOSTS": "",
        }
        started.append(await ServiceProcess([script], env).start())
    for process in started:
        await process.wait_for_event("ready")
    yield
    for process in started:
        await process.stop()


@pytest.fixture
async def engine(amqp_url: str, queue_prefix: str, services: None) -> AsyncIterator[Engine]:
    bus = await AmqpBus.connect(amqp_url, prefix=queue_prefix, connection_name=f"{queue_prefix}:engine")
    engine = Engine(bus)
    sub = await bus.consume("results", engine.handle, prefetch=10, codec=Codec([JobResult]))
    yield engine
    await sub.stop()
    await bus.close()


@pytest.fixture
async def cloud(sandbox: RunningSandbox) -> AsyncIterator[SandboxClient]:
    async with aiohttp.ClientSession() as http:
        yield SandboxClient(http, sandbox.url)


async def test_sandbox_types_create_update_replace_and_delete_through_the_services(
    engine: Engine, cloud: SandboxClient
) -> None:
    net = await engine.run(engine.job("Sandbox::Network", JobAction.CREATE, properties={"name": "net"}))
    assert (net.outcome, net.attributes["status"]) == (JobOutcome.COMPLETE, "ACTIVE"), net.reason
    subnet_props = {"network": net.physical_id, "cidr": "10.1.0.0/24"}
    subnet = await engine.run(engine.job("Sandbox::Subnet", JobAction.CREATE, properties=subnet_props))
    assert subnet.attributes["gateway_ip"] == "10.1.0.1"

    props = {"name": "web-1", "image": "cirros", "networks": [net.physical_id]}
    create = engine.job("Sandbox::Server", JobAction.CREATE, properties=props)
    server = await engine.run(create)
    assert engine.results[f"{create.job_id}:result"].outcome is JobOutcome.IN_PROGRESS
    assert (server.outcome, server.attributes["status"]) == (JobOutcome.COMPLETE, "ACTIVE"), server.reason
    assert server.attributes["first_address"] == "10.1.0.2"
    rid = server.physical_id
    assert rid is not None

    renamed = {**props, "name": "web-one", "metadata": {"tier": "web"}}
    update = engine.job(
        "Sandbox::Server", JobAction.UPDATE, physical_id=rid, properties=renamed, previous_properties=props
    )
    updated = await engine.run(update)
    assert (updated.outcome, updated.physical_id) == (JobOutcome.COMPLETE, rid)
    assert (await cloud.ok("GET", f"/servers/{rid}"))["name"] == "web-one"
    resized = {**renamed, "flavor": "m1.large"}
    resize = engine.job(
        "Sandbox::Server", JobAction.UPDATE, physical_id=rid, properties=resized, previous_properties=renamed
    )
    done = await engine.run(resize)
    assert engine.results[f"{resize.job_id}:result"].outcome is JobOutcome.IN_PROGRESS
    assert (done.outcome, done.attributes["flavor"]) == (JobOutcome.COMPLETE, "m1.large")

    new_image = {**resized, "image": "ubuntu"}
    replace = await engine.run(
        engine.job(
            "Sandbox::Server",
            JobAction.UPDATE,
            physical_id=rid,
            properties=new_image,
            previous_properties=resized,
        )
    )
    assert replace.outcome is JobOutcome.REPLACE
    assert "image of a server cannot change in place" in replace.reason

    deleted = await engine.run(
        engine.job("Sandbox::Server", JobAction.DELETE, physical_id=rid, properties=resized)
    )
    assert deleted.outcome is JobOutcome.COMPLETE
    again = await engine.run(
        engine.job("Sandbox::Server", JobAction.DELETE, physical_id=rid, properties=resized)
    )
    assert again.outcome is JobOutcome.COMPLETE, "already gone counts as deleted"
    refused = await engine.run(
        engine.job(
            "Sandbox::Network", JobAction.DELETE, physical_id=net.physical_id, properties={"name": "net"}
        )
    )
    assert refused.outcome is JobOutcome.FAILED
    assert f"cannot delete network {net.physical_id}: it is still used by subnet" in refused.reason
    assert {r["kind"] for r in await cloud.inventory()} == {"network", "subnet"}


async def test_a_redelivered_create_makes_no_duplicate_and_failures_are_reported(
    engine: Engine, cloud: SandboxClient
) -> None:
    create = engine.job("Sandbox::Volume", JobAction.CREATE, properties={"size": 3})
    await engine.bus.publish("jobs", create)
    await engine.bus.publish("jobs", create)  # the same job delivered twice
    await eventually(lambda: replays_seen(cloud), timeout=60)  # both deliveries reached the sandbox
    first = await engine.result(f"{create.job_id}:result")
    volumes = [r for r in await cloud.inventory() if r["kind"] == "volume"]
    assert [v["id"] for v in volumes] == [first.physical_id]

    broken = await engine.run(
        engine.job("Sandbox::Thing", JobAction.CREATE, properties={"fail": True, "build_seconds": 0.2})
    )
    assert broken.outcome is JobOutcome.FAILED
    assert "is in ERROR: the thing was asked to fail" in broken.reason
    shrink = await engine.run(
        engine.job(
            "Sandbox::Volume",
            JobAction.UPDATE,
            physical_id=first.physical_id,
            properties={"size": 1},
            previous_properties={"size": 3},
        )
    )
    assert shrink.outcome is JobOutcome.REPLACE


async def replays_seen(cloud: SandboxClient) -> bool:
    async with cloud.http.get(f"{cloud.url}/metrics") as response:
        return 'converge_sandbox_idempotent_replays_total{kind="volume"} 1.0' in await response.text()
