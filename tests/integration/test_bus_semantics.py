"""The bus contract, proved on both implementations: real RabbitMQ and in-process.

Real: RabbitMQ (quorum queues, confirms, broker-side connection close,
SIGKILLed consumer processes). Nothing is faked; the memory bus is itself
one of the two implementations under test.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Sequence
from random import random

import aio_pika
import pytest
import structlog.testing

from services.engine.conflicts import ConflictPolicy, retry_conflicts
from shared.bus import Delivery, Outgoing
from shared.bus.amqp import AmqpBus
from shared.bus.memory import MemoryBus, MemorySubscription
from shared.errors import BusError, ConflictError, PermanentError, TransientError
from shared.messages import Message
from tests.support import rabbit
from tests.support.bus_fixtures import CODEC, BusKit, Other, Ping
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


@pytest.fixture
async def amqp_kit(amqp_url: str, queue_prefix: str) -> AsyncIterator[BusKit]:
    kit = BusKit("amqp", amqp_url, queue_prefix)
    yield kit
    await kit.close()


@pytest.fixture(params=["memory", "amqp"])
async def kit(request: pytest.FixtureRequest, amqp_url: str, queue_prefix: str) -> AsyncIterator[BusKit]:
    kit = BusKit(request.param, amqp_url, queue_prefix)
    yield kit
    await kit.close()


class Recorder:
    """A handler that records deliveries and can be told to fail or block."""

    def __init__(self, *, fail_first: int = 0, always_fail: bool = False) -> None:
        self.seen: list[tuple[int, int]] = []  # (n, attempt)
        self.fail_first = fail_first
        self.always_fail = always_fail
        self.release = asyncio.Event()
        self.block = False
        self.active = 0
        self.max_active = 0

    async def __call__(self, message: Message, delivery: Delivery) -> None:
        assert isinstance(message, Ping)
        self.seen.append((message.n, delivery.attempt))
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            if self.block:
                await self.release.wait()
            if self.always_fail or len(self.seen) <= self.fail_first:
                raise ValueError(f"boom {message.n}")
        finally:
            self.active -= 1


async def test_a_published_message_reaches_the_consumer_once(kit: BusKit) -> None:
    bus = await kit.connect()
    handler = Recorder()
    sub = await bus.consume("q", handler, prefetch=4, codec=CODEC)
    await bus.publish_many("q", [Ping(n=i) for i in range(5)])
    await eventually(lambda: len(handler.seen) == 5)
    await sub.stop()
    assert sorted(handler.seen) == [(i, 1) for i in range(5)]
    assert await bus.depth("q") == 0


async def test_a_handler_exception_means_redelivery(kit: BusKit) -> None:
    bus = await kit.connect()
    handler = Recorder(fail_first=1)
    sub = await bus.consume("q", handler, prefetch=1, codec=CODEC)
    await bus.publish("q", Ping(n=7))
    await eventually(lambda: len(handler.seen) == 2)
    await sub.stop()
    assert handler.seen == [(7, 1), (7, 2)]
    assert await bus.dead_letters("q") == []


async def test_after_max_deliveries_the_message_is_dead_lettered_with_the_error(kit: BusKit) -> None:
    bus = await kit.connect()
    handler = Recorder(always_fail=True)
    sub = await bus.consume("q", handler, prefetch=1, codec=CODEC)
    await bus.publish("q", Ping(n=3))
    letters = []

    async def dead_lettered() -> bool:
        letters.extend(await bus.dead_letters("q"))
        return bool(letters)

    await eventually(dead_lettered)
    await sub.stop()
    assert handler.seen == [(3, 1), (3, 2), (3, 3)]
    assert "ValueError: boom 3" in letters[0].error
    assert json.loads(letters[0].body)["n"] == 3


async def test_unknown_kinds_and_malformed_bodies_are_dead_lettered_not_handled(kit: BusKit) -> None:
    bus = await kit.connect()
    handler = Recorder()
    sub = await bus.consume("q", handler, prefetch=2, codec=CODEC)
    await bus.publish("q", Other())
    await bus.publish_raw("q", b"{not json")
    await bus.publish("q", Ping(n=1))
    letters = []

    async def both_dead() -> bool:
        letters.extend(await bus.dead_letters("q"))
        return len(letters) == 2

    await eventually(both_dead)
    await eventually(lambda: handler.seen == [(1, 1)])
    await sub.stop()
    reasons = sorted(letter.error for letter in letters)
    assert "unknown message kind 'test.other'" in reasons[1]
    assert "malformed body" in reasons[0]


async def test_prefetch_bounds_the_handlers_running_at_once(kit: BusKit) -> None:
    bus = await kit.connect()
    handler = Recorder()
    handler.block = True
    sub = await bus.consume("q", handler, prefetch=2, codec=CODEC)
    await bus.publish_many("q", [Ping(n=i) for i in range(6)])
    await eventually(lambda: handler.active == 2)
    # Give a broken implementation time to start a third; a correct one never can.
    await asyncio.sleep(0.3)
    handler.release.set()
    await eventually(lambda: len(handler.seen) == 6)
    await sub.stop()
    assert handler.max_active == 2


async def test_stop_drains_in_flight_handlers_and_acknowledges_them(kit: BusKit) -> None:
    bus = await kit.connect()
    handler = Recorder()
    handler.block = True
    sub = await bus.consume("q", handler, prefetch=1, codec=CODEC)
    await bus.publish("q", Ping(n=1))
    await eventually(lambda: handler.active == 1)
    stopping = asyncio.create_task(sub.stop())
    await asyncio.sleep(0)
    assert not stopping.done()
    handler.release.set()
    await stopping
    assert handler.active == 0
    assert await bus.depth("q") == 0
    again = Recorder()
    sub2 = await bus.consume("q", again, prefetch=1, codec=CODEC)
    await bus.publish("q", Ping(n=2))
    await eventually(lambda: again.seen == [(2, 1)])
    await sub2.stop()


async def test_a_message_is_acknowledged_only_after_its_handler_returns(kit: BusKit, amqp_url: str) -> None:
    """Kill the consumer mid-handler: another consumer gets the message again."""
    bus = await kit.connect()
    await bus.publish("q", Ping(n=42))
    if kit.kind == "memory":
        doomed = Recorder()
        doomed.block = True
        sub = await bus.consume("q", doomed, prefetch=1, codec=CODEC)
        await eventually(lambda: doomed.active == 1)
        assert isinstance(sub, MemorySubscription)
        await sub.kill()
    else:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.support.blocking_consumer",
            amqp_url,
            kit.prefix,
            "q",
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ},
        )
        assert process.stdout is not None
        async with asyncio.timeout(60):
            while b'"handling"' not in (line := await process.stdout.readline()):
                assert line, "the doomed consumer exited before handling the message"
        process.send_signal(signal.SIGKILL)
        await process.wait()
    survivor = Recorder()
    sub = await bus.consume("q", survivor, prefetch=1, codec=CODEC)
    await eventually(lambda: len(survivor.seen) == 1)
    await sub.stop()
    n, attempt = survivor.seen[0]
    assert n == 42
    assert attempt == 2


class Replier:
    """A handler that answers each Ping with a Ping to `replies` (n * 10); `hold`: wait
    until `release` is set, so that many handlers finish at once."""

    def __init__(self, *, hold: bool = False) -> None:
        self.seen: list[tuple[int, int]] = []
        self.hold = hold
        self.release = asyncio.Event()

    async def __call__(self, message: Message, delivery: Delivery) -> list[Outgoing]:
        assert isinstance(message, Ping)
        self.seen.append((message.n, delivery.attempt))
        if self.hold:
            await self.release.wait()
        return [Outgoing("replies", Ping(n=message.n * 10))]


async def test_replies_are_published_in_batches_before_their_deliveries_are_acknowledged(
    kit: BusKit,
) -> None:
    bus = await kit.connect()
    batches: list[int] = []
    publish_batch = bus.publish_batch

    async def counted(outgoing: Sequence[Outgoing]) -> None:
        batches.append(len(outgoing))
        await publish_batch(outgoing)

    handler = Replier(hold=True)
    answers = Recorder()
    sub = await bus.consume("q", handler, prefetch=20, codec=CODEC)
    replies = await bus.consume("replies", answers, prefetch=20, codec=CODEC)
    await bus.publish_many("q", [Ping(n=i) for i in range(20)])
    await eventually(lambda: len(handler.seen) == 20)
    bus.publish_batch = counted  # type: ignore[method-assign]
    handler.release.set()  # all 20 finish in the same turn of the loop
    await eventually(lambda: len(answers.seen) == 20)
    await sub.stop()
    await replies.stop()
    assert sorted(n for n, _ in answers.seen) == [i * 10 for i in range(20)]
    assert sorted(handler.seen) == [(i, 1) for i in range(20)], "each job handled once, then acknowledged"
    assert await bus.depth("q") == 0
    if kit.kind == "amqp":
        assert sum(batches) == 20
        assert len(batches) <= 2, f"one confirm wait per batch, not per reply: {batches}"


async def test_a_delivery_whose_replies_cannot_be_published_is_not_acknowledged(kit: BusKit) -> None:
    bus = await kit.connect()
    publish_batch = bus.publish_batch
    failures = [BusError("the broker is gone")]

    async def failing_once(outgoing: Sequence[Outgoing]) -> None:
        if failures:
            raise failures.pop()
        await publish_batch(outgoing)

    bus.publish_batch = failing_once  # type: ignore[method-assign]
    handler = Replier()
    answers = Recorder()
    sub = await bus.consume("q", handler, prefetch=1, codec=CODEC)
    replies = await bus.consume("replies", answers, prefetch=1, codec=CODEC)
    await bus.publish("q", Ping(n=7))
    await eventually(lambda: len(answers.seen) == 1)
    await sub.stop()
    await replies.stop()
    assert handler.seen == [(7, 1), (7, 2)], "delivered again: its reply was never confirmed"
    assert answers.seen == [(70, 1)]
    assert await bus.depth("q") == 0
    assert await bus.dead_letters("q") == []


async def test_consumers_resume_after_the_broker_closes_the_connection(amqp_kit: BusKit) -> None:
    kit = amqp_kit
    bus = await kit.connect("reconnecting")
    handler = Recorder()
    sub = await bus.consume("q", handler, prefetch=1, codec=CODEC)
    await bus.publish("q", Ping(n=1))
    await eventually(lambda: len(handler.seen) == 1)
    assert await asyncio.to_thread(rabbit.close_connections, f"{kit.prefix}:reconnecting") == 1
    await bus.publish("q", Ping(n=2))  # waits for the robust connection to come back
    await eventually(lambda: [n for n, _ in handler.seen] == [1, 2])
    await sub.stop()


async def test_publish_waits_for_the_broker_confirm_and_reports_a_refusal(amqp_kit: BusKit) -> None:
    kit = amqp_kit
    bus = await kit.connect()
    await bus.publish("q", Ping(n=0))  # declares the queue
    policy = f"{kit.prefix}-full"
    pattern = f"^{kit.prefix}\\.q$"
    await asyncio.to_thread(
        rabbit.set_policy, policy, pattern, '{"max-length": 1, "overflow": "reject-publish"}'
    )

    async def publish_until_refused() -> None:
        async with asyncio.timeout(30):
            while True:  # until the broker applies the policy, publishes are accepted
                await bus.publish("q", Ping(n=1))
                await asyncio.sleep(0.1)

    try:
        with pytest.raises(BusError, match="refused"):
            await publish_until_refused()
    finally:
        await asyncio.to_thread(rabbit.clear_policy, policy)


async def test_memory_bus_chaos_duplicates_and_reorders_from_a_seed() -> None:
    from shared.bus.memory import Chaos

    async def order(seed: int) -> list[int]:
        bus = MemoryBus(chaos=Chaos(seed=seed, duplicate_rate=0.5))
        for i in range(20):
            await bus.publish("q", Ping(n=i))
        handler = Recorder()
        sub = await bus.consume("q", handler, prefetch=1, codec=CODEC)

        async def taken() -> bool:
            return await bus.depth("q") == 0

        await eventually(taken)
        await sub.stop()  # drains what is still in flight
        await bus.close()
        return [n for n, _ in handler.seen]

    first, again, other = await order(1), await order(1), await order(2)
    assert first == again
    assert first != other
    assert sorted(set(first)) == list(range(20))
    assert len(first) > 20  # some were duplicated
    assert first != sorted(first)


async def test_an_abandoned_message_is_requeued_and_never_counts_as_a_failure(kit: BusKit) -> None:
    from shared.errors import Abandoned

    bus = await kit.connect()
    attempts: list[int] = []

    async def gives_back_then_handles(message: Message, delivery: Delivery) -> None:
        attempts.append(delivery.attempt)
        if len(attempts) <= kit.max_deliveries + 1:  # more than a failing message is allowed
            raise Abandoned("shutting down")

    sub = await bus.consume("q", gives_back_then_handles, prefetch=1, codec=CODEC)
    await bus.publish("q", Ping(n=1))
    await eventually(lambda: len(attempts) == kit.max_deliveries + 2)
    await sub.stop()
    assert await bus.dead_letters("q") == []
    assert await bus.depth("q") == 0


async def test_a_consumer_that_the_broker_refuses_at_start_retries_until_it_can(amqp_kit: BusKit) -> None:
    # The queue exists with other arguments, so declaring it (a quorum queue) fails
    # with a channel error, as a consume of a just-declared quorum queue can fail.
    kit = amqp_kit
    connection = await aio_pika.connect_robust(kit.amqp_url)
    try:
        channel = await connection.channel()
        await channel.declare_queue(f"{kit.prefix}.q", durable=True)
        bus = await kit.connect("retrying")
        handler = Recorder()
        with structlog.testing.capture_logs() as logs:
            starting = asyncio.create_task(bus.consume("q", handler, prefetch=1, codec=CODEC))
            await eventually(lambda: any(e["event"] == "consume_retry" for e in logs))
            assert not starting.done(), "still trying, not given up"
            await channel.queue_delete(f"{kit.prefix}.q")
            sub = await asyncio.wait_for(starting, timeout=60)
        await bus.publish("q", Ping(n=1))
        await eventually(lambda: [n for n, _ in handler.seen] == [1])
        await sub.stop()
    finally:
        await connection.close()


async def test_a_consumer_gives_up_with_a_bus_error_after_its_attempts(amqp_kit: BusKit) -> None:
    kit = amqp_kit
    connection = await aio_pika.connect_robust(kit.amqp_url)
    try:
        channel = await connection.channel()
        await channel.declare_queue(f"{kit.prefix}.q", durable=True)
        bus = await kit.connect("giving-up")
        assert isinstance(bus, AmqpBus)
        with pytest.raises(BusError, match="cannot consume q"):
            await bus.consume("q", Recorder(), prefetch=1, codec=CODEC, attempts=2)
        await channel.queue_delete(f"{kit.prefix}.q")
    finally:
        await connection.close()


async def test_a_permanent_error_is_dead_lettered_on_its_first_delivery_with_its_reason(kit: BusKit) -> None:
    bus = await kit.connect()
    attempts: list[int] = []

    async def refuses(message: Message, delivery: Delivery) -> None:
        attempts.append(delivery.attempt)
        raise PermanentError("template 7 of stack s is missing")

    sub = await bus.consume("q", refuses, prefetch=1, codec=CODEC)
    await bus.publish("q", Ping(n=5))
    letters = []

    async def dead_lettered() -> bool:
        letters.extend(await bus.dead_letters("q"))
        return bool(letters)

    await eventually(dead_lettered)
    await sub.stop()
    assert attempts == [1]
    assert "not retried: PermanentError: template 7 of stack s is missing" in letters[0].error
    assert json.loads(letters[0].body)["n"] == 5
    assert await bus.depth("q") == 0


async def test_a_transient_error_is_redelivered_no_sooner_than_its_retry_after(kit: BusKit) -> None:
    bus = await kit.connect()
    seen: list[tuple[int, float]] = []  # (attempt, when)

    async def throttled_once(message: Message, delivery: Delivery) -> None:
        seen.append((delivery.attempt, time.monotonic()))
        if delivery.attempt == 1:
            raise TransientError("429 Too Many Requests", retry_after=1.5)

    sub = await bus.consume("q", throttled_once, prefetch=1, codec=CODEC)
    await bus.publish("q", Ping(n=1))
    await eventually(lambda: len(seen) == 2)
    await sub.stop()
    assert [attempt for attempt, _ in seen] == [1, 2]
    assert seen[1][1] - seen[0][1] >= 1.5
    assert await bus.dead_letters("q") == []
    assert await bus.depth("q") == 0


async def test_a_message_waiting_out_its_retry_after_goes_back_at_once_when_its_consumer_stops(
    kit: BusKit,
) -> None:
    bus = await kit.connect()
    first: list[int] = []

    async def throttled(message: Message, delivery: Delivery) -> None:
        first.append(delivery.attempt)
        raise TransientError("503 Service Unavailable", retry_after=600)

    sub = await bus.consume("q", throttled, prefetch=1, codec=CODEC)
    await bus.publish("q", Ping(n=9))
    await eventually(lambda: first == [1])
    await sub.stop()  # does not sit out the pause (capped at a minute; the wait below is shorter)
    handler = Recorder()
    sub = await bus.consume("q", handler, prefetch=1, codec=CODEC)
    await eventually(lambda: handler.seen == [(9, 2)], timeout=30)
    await sub.stop()
    assert await bus.dead_letters("q") == []


async def test_a_conflict_is_retried_inside_the_handler_and_its_message_acknowledged_once(
    kit: BusKit,
) -> None:
    """As the engine's consumer does (`services.engine.conflicts`): the bus never sees the conflicts."""
    bus = await kit.connect()
    runs: list[int] = []

    async def handle(message: Message, delivery: Delivery) -> None:
        async def attempt() -> None:
            runs.append(delivery.attempt)
            if len(runs) <= 3:
                raise ConflictError(f"resource changed concurrently ({len(runs)}); will retry")

        await retry_conflicts(attempt, policy=ConflictPolicy(attempts=5), sleep=asyncio.sleep, random=random)

    sub = await bus.consume("q", handle, prefetch=1, codec=CODEC)
    await bus.publish("q", Ping(n=2))
    await eventually(lambda: len(runs) == 4)
    await sub.stop()  # a message not acknowledged by now would be back in the queue
    assert runs == [1, 1, 1, 1]
    assert await bus.depth("q") == 0
    assert await bus.dead_letters("q") == []
