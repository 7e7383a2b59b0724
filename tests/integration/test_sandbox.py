"""The `converge-sandbox` process: its HTTP API, rules, idempotency, out-of-band changes,
inventory and metrics, and a notification on RabbitMQ for every change.
Real: the console script as a child process, HTTP, RabbitMQ (AmqpBus), SIGTERM."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator

import aiohttp
import pytest

from shared.bus import Delivery
from shared.bus.amqp import AmqpBus
from shared.messages import Message
from shared.notifications import (
    NOTIFICATION_CODEC,
    NotificationEvent,
    ProviderNotification,
    notification_queue,
)
from tests.support.processes import run_script
from tests.support.sandbox import RunningSandbox, SandboxClient, start_sandbox
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


class Notifications:
    def __init__(self) -> None:
        self.seen: list[ProviderNotification] = []

    async def handle(self, message: Message, _: Delivery) -> None:
        assert isinstance(message, ProviderNotification)
        self.seen.append(message)

    def of(self, physical_id: str) -> list[tuple[NotificationEvent, str]]:
        return [(n.event, n.status) for n in self.seen if n.physical_id == physical_id]


@pytest.fixture
async def notifications(amqp_url: str, queue_prefix: str) -> AsyncIterator[Notifications]:
    bus = await AmqpBus.connect(amqp_url, prefix=queue_prefix, connection_name=f"{queue_prefix}:test")
    inbox = Notifications()
    sub = await bus.consume(
        notification_queue("sandbox"), inbox.handle, prefetch=50, codec=NOTIFICATION_CODEC
    )
    yield inbox
    await sub.stop()
    await bus.close()


@pytest.fixture
async def sandbox(amqp_url: str, queue_prefix: str) -> AsyncIterator[RunningSandbox]:
    env = {
        "CONVERGE_AMQP_URL": amqp_url,
        "CONVERGE_QUEUE_PREFIX": queue_prefix,
        "CONVERGE_SANDBOX_LATENCY": "0.2",
        "CONVERGE_SANDBOX_SEED": "7",
    }
    running = await start_sandbox(env)
    yield running
    await running.process.stop()


@pytest.fixture
async def api(sandbox: RunningSandbox) -> AsyncIterator[SandboxClient]:
    async with aiohttp.ClientSession() as http:
        yield SandboxClient(http, sandbox.url)


async def test_a_web_tier_lives_and_dies_under_the_clouds_rules(
    sandbox: RunningSandbox, api: SandboxClient, notifications: Notifications
) -> None:
    net = (await api.ok("POST", "/networks", {"name": "net"}))["id"]
    subnet = await api.ok("POST", "/subnets", {"network": net, "cidr": "10.0.0.0/24"})
    assert subnet["gateway_ip"] == "10.0.0.1"
    body = {"name": "web-1", "image": "cirros", "networks": [net]}
    status, server, headers = await api.call("POST", "/servers", body, headers={"Idempotency-Key": "k-1"})
    assert (status, server["status"], server["first_address"]) == (201, "BUILD", "10.0.0.2")
    assert headers["Location"] == f"/v1/servers/{server['id']}"
    status, again, headers = await api.call("POST", "/servers", body, headers={"Idempotency-Key": "k-1"})
    assert (status, again["id"], headers["Idempotent-Replayed"]) == (200, server["id"], "true")
    status, error, _ = await api.call(
        "POST", "/servers", {**body, "image": "x"}, headers={"Idempotency-Key": "k-1"}
    )
    assert status == 400
    assert "already used for a different server" in error["error"]["message"]
    await eventually(lambda: api_status_is(api, "servers", server["id"], "ACTIVE"))

    volume = (await api.ok("POST", "/volumes", {"size": 10}))["id"]
    attachment = (await api.ok("POST", "/volume_attachments", {"server": server["id"], "volume": volume}))[
        "id"
    ]
    renamed = await api.ok("PATCH", f"/servers/{server['id']}", {"name": "web-one"})
    assert (renamed["id"], renamed["name"], renamed["volumes"]) == (server["id"], "web-one", [volume])
    extended = await api.ok("PATCH", f"/volumes/{volume}", {"size": 20})
    assert (extended["size"], extended["status"], extended["attached_to"]) == (20, "BUILD", server["id"])

    for method, path, patch, message in [
        ("PATCH", f"/servers/{server['id']}", {"image": "ubuntu"}, "image cannot change in place"),
        ("PATCH", f"/volumes/{volume}", {"size": 5}, "size cannot change in place"),
        ("DELETE", f"/networks/{net}", None, f"cannot delete network {net}: it is still used by subnet"),
        ("DELETE", f"/volumes/{volume}", None, f"still used by volume_attachment {attachment}"),
        ("DELETE", f"/servers/{server['id']}", None, f"still used by volume_attachment {attachment}"),
    ]:
        status, error, _ = await api.call(method, path, patch)
        assert (status, error["error"]["code"]) == (409, 409), path
        assert message in error["error"]["message"]
    status, error, _ = await api.call("GET", "/servers/nope")
    assert (status, error["error"]["message"]) == (404, "no server with id 'nope'")

    broken = await api.ok("POST", f"/servers/{server['id']}/break", {"reason": "host lost"})
    assert (broken["status"], broken["status_reason"]) == ("ERROR", "host lost")
    inventory = await api.ok("GET", "/inventory")
    assert inventory["counts"] == {
        "network": 1,
        "subnet": 1,
        "server": 1,
        "volume": 1,
        "volume_attachment": 1,
        "thing": 0,
    }
    for collection, rid in [
        ("volume_attachments", attachment),
        ("volumes", volume),
        ("servers", server["id"]),
        ("subnets", subnet["id"]),
        ("networks", net),
    ]:
        status, _, _ = await api.call("DELETE", f"/{collection}/{rid}")
        assert status == 204, collection
    assert await api.inventory() == []

    await eventually(lambda: (NotificationEvent.DELETED, "DELETED") in notifications.of(net), timeout=30)
    assert notifications.of(server["id"]) == [
        (NotificationEvent.CREATED, "BUILD"),
        (NotificationEvent.STATUS_CHANGED, "ACTIVE"),
        (NotificationEvent.UPDATED, "ACTIVE"),
        (NotificationEvent.STATUS_CHANGED, "ERROR"),
        (NotificationEvent.DELETED, "DELETED"),
    ]
    assert (NotificationEvent.UPDATED, "BUILD") in notifications.of(volume)
    renamed_note = next(n for n in notifications.seen if n.event is NotificationEvent.UPDATED)
    assert renamed_note.properties["name"] == "web-one"
    assert renamed_note.resource_kind == "server"
    assert len({n.id for n in notifications.seen}) == len(notifications.seen)

    async with api.http.get(f"{sandbox.url}/metrics") as response:
        metrics = await response.text()
    assert 'converge_sandbox_creates_total{kind="server"} 1.0' in metrics
    assert 'converge_sandbox_idempotent_replays_total{kind="server"} 1.0' in metrics
    assert 'converge_sandbox_deletes_total{kind="network"} 1.0' in metrics
    assert 'converge_sandbox_refused_total{status="409"} 5.0' in metrics
    assert 'converge_sandbox_notifications_total{outcome="published"}' in metrics
    for path in ("/healthz", "/readyz"):
        async with api.http.get(f"{sandbox.url}{path}") as response:
            assert response.status == 200, path

    sandbox.process.signal(signal.SIGTERM)
    assert await sandbox.process.wait() == 0


async def api_status_is(api: SandboxClient, collection: str, rid: str, status: str) -> bool:
    return await api.status(collection, rid) == status


async def test_a_bad_setting_stops_the_sandbox_with_exit_code_2() -> None:
    code, out = await run_script(["converge-sandbox"], {"CONVERGE_SANDBOX_FAILURE_RATE": "2"})
    assert code == 2
    assert "CONVERGE_SANDBOX_FAILURE_RATE='2'" in out
