"""Proves the sandbox announces every change on the bus in order, one unique message each,
and that a slow or stalled bus never blocks the cloud (bounded, counted, logged).
Real: the in-process bus and the service's timer; faked: a bus that stalls (our own seam)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry

from services.sandbox.model import Change
from services.sandbox.notify import Notifier, NotifierMetrics
from services.sandbox.service import build_sandbox
from services.sandbox.specs import Kind
from shared.bus import Delivery
from shared.bus.memory import MemoryBus
from shared.messages import Message
from shared.notifications import NOTIFICATION_CODEC, NotificationEvent, ProviderNotification
from shared.settings import SandboxSettings
from shared.tasks import Supervisor
from tests.support.waiting import eventually

QUEUE = "notifications.sandbox"


class StalledBus(MemoryBus):
    """A bus whose publishes wait until `gate` opens (a broker that stopped answering)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    async def publish(self, queue: str, message: Message) -> None:
        await self.gate.wait()
        await super().publish(queue, message)


class Inbox:
    def __init__(self) -> None:
        self.seen: list[ProviderNotification] = []

    async def handle(self, message: Message, _: Delivery) -> None:
        assert isinstance(message, ProviderNotification)
        self.seen.append(message)


def change(n: int) -> Change:
    return Change(Kind.THING, f"t-{n}", NotificationEvent.UPDATED, "ACTIVE", {"data": {"n": n}}, "", 1.0 + n)


def sample(registry: CollectorRegistry, outcome: str) -> float:
    return registry.get_sample_value("converge_sandbox_notifications_total", {"outcome": outcome}) or 0.0


@pytest.fixture
async def supervisor() -> AsyncIterator[Supervisor]:
    tasks = Supervisor()
    yield tasks
    await tasks.stop()


async def test_every_change_of_the_cloud_is_announced_in_order(supervisor: Supervisor) -> None:
    bus, inbox, registry = MemoryBus(), Inbox(), CollectorRegistry()
    sub = await bus.consume(QUEUE, inbox.handle, prefetch=1, codec=NOTIFICATION_CODEC)
    sandbox = build_sandbox(SandboxSettings(sandbox_latency=0.05, sandbox_seed=1), bus=bus, registry=registry)
    sandbox.start(supervisor)
    rid = sandbox.create(Kind.VOLUME, {"size": 1, "name": "data"}, idempotency_key=None).resource["id"]
    await eventually(lambda: len(inbox.seen) == 2, timeout=30)  # the timer finishes the build
    sandbox.update(Kind.VOLUME, rid, {"name": "logs"})
    sandbox.delete(Kind.VOLUME, rid)
    await eventually(lambda: len(inbox.seen) == 4, timeout=30)
    assert [(n.event, n.status) for n in inbox.seen] == [
        (NotificationEvent.CREATED, "BUILD"),
        (NotificationEvent.STATUS_CHANGED, "ACTIVE"),
        (NotificationEvent.UPDATED, "ACTIVE"),
        (NotificationEvent.DELETED, "DELETED"),
    ]
    first = inbox.seen[0]
    assert (first.provider, first.resource_kind, first.physical_id) == ("sandbox", "volume", rid)
    assert first.properties == {"size": 1, "name": "data"}
    assert inbox.seen[2].properties["name"] == "logs"
    assert inbox.seen[3].properties == {}
    assert len({n.id for n in inbox.seen}) == 4, "each notification has its own message id"
    assert sample(registry, "published") == 4
    await sub.stop()
    await bus.close()


async def test_a_stalled_bus_times_out_each_publish_without_blocking_senders(supervisor: Supervisor) -> None:
    bus, registry = StalledBus(), CollectorRegistry()
    notifier = Notifier(bus, metrics=NotifierMetrics(registry), publish_timeout=0.05)
    supervisor.spawn("publisher", notifier.run())
    notifier.send([change(1), change(2)])  # returns at once although nothing can be published
    await eventually(lambda: sample(registry, "failed") == 2, timeout=30)
    bus.gate.set()
    notifier.send([change(3)])
    await notifier.flush(seconds=30)
    assert sample(registry, "published") == 1
    assert await bus.depth(QUEUE) == 1


async def test_a_full_queue_drops_changes_instead_of_waiting() -> None:
    registry = CollectorRegistry()
    notifier = Notifier(StalledBus(), metrics=NotifierMetrics(registry), capacity=2)
    notifier.send([change(n) for n in range(5)])  # no publisher running: only 2 fit
    assert sample(registry, "dropped") == 3


async def test_without_a_bus_nothing_is_queued() -> None:
    registry = CollectorRegistry()
    notifier = Notifier(None, metrics=NotifierMetrics(registry), capacity=1)
    notifier.send([change(n) for n in range(3)])
    assert not notifier.enabled
    assert sample(registry, "dropped") == 0
    await notifier.flush(seconds=1)
