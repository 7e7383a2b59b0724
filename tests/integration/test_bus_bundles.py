"""Bundles on RabbitMQ: messages published together for one queue travel as one AMQP
message, and each is still handled, retried and dead-lettered as a message of its own.

Real: RabbitMQ (quorum queues, confirms, a consumer's connection dropped mid-bundle).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import aio_pika
import pytest

from shared.bus import Bus, Delivery, bundles
from shared.messages import Message
from tests.support.bus_fixtures import CODEC, BusKit, Ping
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


@pytest.fixture
async def kit(amqp_url: str, queue_prefix: str) -> AsyncIterator[BusKit]:
    kit = BusKit("amqp", amqp_url, queue_prefix, bundle_max=4, bundled_queues=frozenset({"q"}))
    yield kit
    await kit.close()


class Seen:
    """Records (n, attempt) of each delivery; fails the numbers in `failing` (the first
    `times` deliveries of each), and holds those in `held` until `release` is set."""

    def __init__(
        self, *, failing: frozenset[int] = frozenset(), times: int = 1_000, held: frozenset[int] = frozenset()
    ) -> None:
        self.seen: list[tuple[int, int]] = []
        self.failing, self.times, self.held = failing, times, held
        self.release = asyncio.Event()

    async def __call__(self, message: Message, delivery: Delivery) -> None:
        assert isinstance(message, Ping)
        self.seen.append((message.n, delivery.attempt))
        if message.n in self.held:
            await self.release.wait()
        if message.n in self.failing and delivery.attempt <= self.times:
            raise ValueError(f"boom {message.n}")


async def consuming(kit: BusKit, name: str, handler: Seen, *, prefetch: int) -> Bus:
    """A bus of its own (a consumer process of its own) on which `handler` consumes `q`."""
    bus = await kit.connect(name)
    await bus.consume("q", handler, prefetch=prefetch, codec=CODEC)
    return bus


async def test_messages_published_together_travel_in_bundles_and_each_is_handled_once(kit: BusKit) -> None:
    bus = await kit.connect()
    await bus.publish_many("q", [Ping(n=i) for i in range(10)])
    assert await bus.depth("q") == 3, "10 messages in bundles of at most 4"
    handler = Seen()
    sub = await bus.consume("q", handler, prefetch=8, codec=CODEC)
    await eventually(lambda: len(handler.seen) == 10)
    await sub.stop()
    assert sorted(handler.seen) == [(i, 1) for i in range(10)]
    assert await bus.depth("q") == 0


async def test_a_failing_member_alone_is_delivered_again(kit: BusKit) -> None:
    bus = await kit.connect()
    handler = Seen(failing=frozenset({2}), times=1)
    sub = await bus.consume("q", handler, prefetch=8, codec=CODEC)
    await bus.publish_many("q", [Ping(n=i) for i in range(4)])
    await eventually(lambda: len(handler.seen) == 5)
    await sub.stop()
    assert sorted(handler.seen) == [(0, 1), (1, 1), (2, 1), (2, 2), (3, 1)]
    assert await bus.dead_letters("q") == []
    assert await bus.depth("q") == 0


async def test_a_member_failing_every_delivery_is_dead_lettered_alone_with_its_error(kit: BusKit) -> None:
    bus = await kit.connect()
    handler = Seen(failing=frozenset({1}))
    sub = await bus.consume("q", handler, prefetch=8, codec=CODEC)
    await bus.publish_many("q", [Ping(n=i) for i in range(3)])
    letters = []

    async def dead_lettered() -> bool:
        letters.extend(await bus.dead_letters("q"))
        return bool(letters)

    await eventually(dead_lettered)
    await sub.stop()
    assert sorted(handler.seen) == [(0, 1), (1, 1), (1, 2), (1, 3), (2, 1)]
    assert [json.loads(letter.body)["n"] for letter in letters] == [1]
    assert "failed 3 deliveries" in letters[0].error
    assert "ValueError: boom 1" in letters[0].error
    assert await bus.depth("q") == 0


async def test_members_a_busy_consumer_has_no_free_handler_for_are_passed_on_at_once(kit: BusKit) -> None:
    """A consumer takes from a bundle only what it has free handlers for: the rest go back
    to the queue at once, each alone, for a consumer that is free, and count as no delivery."""
    busy = Seen(held=frozenset(range(4)))
    busy_bus = await consuming(kit, "busy", busy, prefetch=1)
    await busy_bus.publish_many("q", [Ping(n=i) for i in range(4)])
    await eventually(lambda: len(busy.seen) == 1)
    free = Seen()
    free_bus = await consuming(kit, "free", free, prefetch=8)
    await eventually(lambda: len(free.seen) == 3)
    busy.release.set()
    assert sorted(busy.seen + free.seen) == [(i, 1) for i in range(4)], "each once, none counted as failed"
    assert await free_bus.depth("q") == 0


async def test_a_bundle_its_consumer_never_acknowledged_comes_back_whole(kit: BusKit) -> None:
    """A consumer that goes away (its connection drops) with a member still running leaves
    the whole bundle to the broker: every member is delivered again, none is lost."""
    first = Seen(held=frozenset({3}))
    first_bus = await consuming(kit, "first", first, prefetch=8)
    await first_bus.publish_many("q", [Ping(n=i) for i in range(4)])
    await eventually(lambda: len(first.seen) == 4)
    await first_bus.close()
    second = Seen()
    second_bus = await consuming(kit, "second", second, prefetch=8)
    await eventually(lambda: len(second.seen) == 4)
    first.release.set()
    assert sorted(second.seen) == [(i, 2) for i in range(4)]
    assert await second_bus.depth("q") == 0


async def test_a_bundle_the_broker_dead_letters_is_read_back_as_its_members(
    kit: BusKit, amqp_url: str, queue_prefix: str
) -> None:
    bus = await kit.connect()
    await bus.depth("q")  # declares the queue, its dead-letter queue and exchange
    members = [Ping(n=7).encode(), Ping(n=8).encode()]
    connection = await aio_pika.connect(amqp_url)
    try:
        channel = await connection.channel()
        exchange = await channel.get_exchange(f"{queue_prefix}.dead-letter")
        body = bundles.encode(members)
        await exchange.publish(aio_pika.Message(body, content_type=bundles.CONTENT_TYPE), routing_key="q")
    finally:
        await connection.close()
    letters = []

    async def both() -> bool:
        letters.extend(await bus.dead_letters("q"))
        return len(letters) == 2

    await eventually(both)
    assert [letter.body for letter in letters] == members
