"""RabbitMQ bus over aio-pika: the gateway for all AMQP in Converge.

Topology, every name prefixed with the queue prefix `P`:
- queue `P.<name>`: durable quorum queue, consumed with per-queue prefetch;
  handler failures are dead-lettered by our own code (at once for a permanent
  error, else after `max_deliveries`; see `dispatch`), a transient error's
  delayed redelivery is the message held unacknowledged for its pause and then
  requeued (never lost: a consumer that dies meanwhile returns it), and the
  broker's delivery limit (`POISON_DELIVERY_LIMIT`) catches messages that
  crash their consumers before any error can be reported;
- exchange `P.dead-letter` (direct) and queue `P.<name>.dead` bound to it with
  routing key `<name>`; handler failures land there with `x-converge-error`.
Messages are persistent and published with publisher confirms (mandatory, so
an unroutable message is an error, never a silent drop). A batch
(`publish_batch`, `publish_raw_batch`, and the replies handlers return) is
written at once and its confirms awaited together under one timeout; the
replies of handlers that finish while a batch is being confirmed go in the
next one (group commit), and each delivery is acknowledged only after its
replies are confirmed. Messages published together for one queue travel in
bundles (`bundles`: up to `bundle_max` in one AMQP message, which the broker
stores, confirms, delivers and is acknowledged for once): those of a
`publish_batch` (handlers' replies) whatever their queue, those of a
`publish_raw_batch` (an engine's outbox) if their queue is one of the
`bundled_queues`. A subscription takes from a bundle the members it has free
handlers for (at most `prefetch` handlers run at once, bundles' members
included) and sends the others back to the queue at once, each alone, for
any consumer; it handles each member as a delivery of its own and
acknowledges the bundle once every member it took is handled, dead-lettered
alone, or sent again alone to be retried (`ATTEMPTS_HEADER` carries its
deliveries so far). A consumer that dies before that leaves the whole bundle
to be delivered again. The connection is
robust: after a broker-side close it reconnects and restores channels,
queues and consumers; a publish during the outage waits for the channel to
come back, within `publish_timeout`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple

import aio_pika
import aiormq
import structlog
from aio_pika.abc import (
    AbstractChannel,
    AbstractIncomingMessage,
    AbstractQueue,
    AbstractRobustConnection,
)

from shared.bus import bundles
from shared.bus.base import DeadLetter, Delivery, Handler, Outgoing
from shared.bus.dispatch import ACK, Action, Verdict, dispatch, hold, with_replies_published
from shared.errors import BusError, MessageRejected
from shared.messages import Codec, Message
from shared.settings import MAX_DELIVERIES
from shared.waiting import keep_trying

log = structlog.get_logger(__name__)

ERROR_HEADER = "x-converge-error"
# On a bundle's member sent again alone: the deliveries it had in its bundle.
ATTEMPTS_HEADER = "x-converge-attempts"
# Messages one bundle carries at most (`bundles`); 1 bundles nothing.
BUNDLE_MAX = 64
# Broker-side backstop for messages that crash their consumers before any
# error can be reported. A constant, not a setting: queue arguments must be
# identical for every service that declares the queue.
POISON_DELIVERY_LIMIT = 20
# Starting a consumer: how often to try, and how long one try may take.
CONSUME_ATTEMPTS = 8
CONSUME_ATTEMPT_SECONDS = 15.0
# How long the broker may take to confirm one publish or one batch (seconds).
CONFIRM_SECONDS = 10.0
# Most messages of a batch written before their confirms are awaited.
CONFIRM_CHUNK = 1000
_RETRYABLE = (
    aiormq.exceptions.AMQPConnectionError,
    aiormq.exceptions.ChannelInvalidStateError,
    ConnectionError,
    asyncio.TimeoutError,
)


class AmqpBus:
    def __init__(
        self,
        connection: AbstractRobustConnection,
        publish_channel: AbstractChannel,
        *,
        prefix: str,
        max_deliveries: int,
        publish_timeout: float,
        bundle_max: int = BUNDLE_MAX,
        bundled_queues: frozenset[str] = frozenset(),
    ) -> None:
        self._connection = connection
        self._publish_channel = publish_channel
        self._prefix = prefix
        self._max_deliveries = max_deliveries
        self._publish_timeout = publish_timeout
        self._bundle_max = bundle_max
        self._bundled_queues = bundled_queues
        self._declared: set[str] = set()

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        prefix: str,
        max_deliveries: int = MAX_DELIVERIES,
        connection_name: str = "converge",
        publish_timeout: float = 30.0,
        wait: float = 0.0,
        bundle_max: int = BUNDLE_MAX,
        bundled_queues: frozenset[str] = frozenset(),
    ) -> AmqpBus:
        """Connect, trying again for up to `wait` seconds while the broker is not
        reachable (starting, restarting, overloaded); then `BusError`."""

        async def attempt() -> tuple[AbstractRobustConnection, AbstractChannel]:
            connection = await aio_pika.connect_robust(
                url, client_properties={"connection_name": connection_name}, timeout=10
            )
            return connection, await connection.channel(publisher_confirms=True, on_return_raises=True)

        failures = (*_RETRYABLE, aiormq.exceptions.AMQPError, OSError)
        try:
            connection, channel = await keep_trying(
                attempt, retry_on=failures, wait=wait, waiting_event="waiting_for_rabbitmq"
            )
        except failures as exc:
            raise BusError(f"cannot connect to RabbitMQ: {exc!r}") from exc
        connection.reconnect_callbacks.add(_log_reconnect)
        return cls(
            connection,
            channel,
            prefix=prefix,
            max_deliveries=max_deliveries,
            publish_timeout=publish_timeout,
            bundle_max=bundle_max,
            bundled_queues=bundled_queues,
        )

    # -- names and topology -------------------------------------------------

    def queue_name(self, queue: str) -> str:
        return f"{self._prefix}.{queue}"

    @property
    def _dlx_name(self) -> str:
        return f"{self._prefix}.dead-letter"

    async def _declare(self, channel: AbstractChannel, queue: str) -> AbstractQueue:
        """Declare `queue` and its dead-letter queue (idempotent)."""
        dlx = await channel.declare_exchange(self._dlx_name, aio_pika.ExchangeType.DIRECT, durable=True)
        dead = await channel.declare_queue(
            f"{self.queue_name(queue)}.dead", durable=True, arguments={"x-queue-type": "quorum"}
        )
        await dead.bind(dlx, routing_key=queue)
        return await channel.declare_queue(
            self.queue_name(queue),
            durable=True,
            arguments={
                "x-queue-type": "quorum",
                "x-dead-letter-exchange": self._dlx_name,
                "x-dead-letter-routing-key": queue,
                "x-delivery-limit": POISON_DELIVERY_LIMIT,
            },
        )

    async def _ensure(self, queue: str) -> None:
        if queue not in self._declared:
            await self._declare(self._publish_channel, queue)
            self._declared.add(queue)

    # -- publishing ----------------------------------------------------------

    async def publish(self, queue: str, message: Message) -> None:
        await self._publish(
            "",
            self.queue_name(queue),
            message.encode(),
            message_id=message.id,
            kind=message.kind,
            ensure=queue,
        )

    async def publish_raw(self, queue: str, body: bytes) -> None:
        await self._publish("", self.queue_name(queue), body, ensure=queue)

    async def depth(self, queue: str) -> int:
        channel = await self._connection.channel()
        try:
            declared = await self._declare(channel, queue)
            count = declared.declaration_result.message_count
            return int(count or 0)
        finally:
            await channel.close()

    async def publish_many(self, queue: str, messages: Sequence[Message]) -> None:
        await self.publish_batch([Outgoing(queue, m) for m in messages])

    async def publish_batch(self, outgoing: Sequence[Outgoing]) -> None:
        """Messages for one queue go in bundles, whatever the queue: this is how handlers'
        replies are published."""
        await self._publish_together(_encoded(outgoing), every_queue=True)

    async def publish_raw_batch(self, bodies: Sequence[tuple[str, bytes]]) -> None:
        await self._publish_together([_Out(queue, body, None, None) for queue, body in bodies])

    async def _publish_together(self, outgoing: Sequence[_Out], *, every_queue: bool = False) -> None:
        """Write every message at once, several for one of the `bundled_queues` (or, with
        `every_queue`, for any queue) in bundles (`bundles`), and wait for their confirms
        together, in chunks of `CONFIRM_CHUNK` AMQP messages (each confirmed within
        `CONFIRM_SECONDS`)."""
        await self._publish_chunks(self._bundled(outgoing, every_queue=every_queue))

    async def _publish_chunks(self, messages: Sequence[tuple[str, aio_pika.Message]]) -> None:
        for start in range(0, len(messages), CONFIRM_CHUNK):
            await self._publish_chunk(messages[start : start + CONFIRM_CHUNK])

    def _bundled(self, outgoing: Sequence[_Out], *, every_queue: bool) -> list[tuple[str, aio_pika.Message]]:
        """(queue, AMQP message) to publish: each queue's messages, in order, packed into
        bundles of up to `bundle_max` if the queue is bundled; a message alone in its run
        goes as itself."""
        by_queue: dict[str, list[_Out]] = {}
        for out in outgoing:
            by_queue.setdefault(out.queue, []).append(out)
        messages: list[tuple[str, aio_pika.Message]] = []
        for queue, outs in by_queue.items():
            most = self._bundle_max if every_queue or queue in self._bundled_queues else 1
            for run in bundles.pack([out.body for out in outs], max_members=most):
                if len(run) == 1:
                    out = outs[run[0]]
                    messages.append(
                        (queue, _amqp_message(out.body, message_id=out.message_id, kind=out.kind))
                    )
                else:
                    body = bundles.encode([outs[i].body for i in run])
                    messages.append((queue, _amqp_message(body, message_id=None, kind=None, bundle=True)))
        return messages

    async def _publish_chunk(self, messages: Sequence[tuple[str, aio_pika.Message]]) -> None:
        if not messages:
            return
        batch = [(self.queue_name(queue), message) for queue, message in messages]
        queues = sorted({queue for queue, _ in messages})

        async def send() -> None:
            for queue in queues:
                await self._ensure(queue)
            exchange = self._publish_channel.default_exchange
            async with asyncio.timeout(CONFIRM_SECONDS):
                await asyncio.gather(
                    *(exchange.publish(message, routing_key=key, timeout=None) for key, message in batch)
                )

        await self._retrying(", ".join(self.queue_name(q) for q in queues), send)

    async def _publish(
        self,
        exchange_name: str,
        routing_key: str,
        body: bytes,
        *,
        message_id: str | None = None,
        kind: str | None = None,
        headers: dict[str, Any] | None = None,
        ensure: str | None = None,
    ) -> None:
        amqp_message = _amqp_message(body, message_id=message_id, kind=kind, headers=headers)

        async def send() -> None:
            if ensure is not None:
                await self._ensure(ensure)
            exchange = (
                self._publish_channel.default_exchange
                if not exchange_name
                else await self._publish_channel.get_exchange(exchange_name, ensure=False)
            )
            await exchange.publish(amqp_message, routing_key=routing_key, timeout=CONFIRM_SECONDS)

        await self._retrying(routing_key, send)

    async def _retrying(self, routing_key: str, send: Callable[[], Awaitable[None]]) -> None:
        """`send` until the broker confirms, trying again while the connection is being
        restored, for up to `publish_timeout` (a retried batch may be published twice:
        receivers are idempotent)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._publish_timeout
        while True:
            try:
                await send()
                return
            except aio_pika.exceptions.DeliveryError as exc:
                raise BusError(f"broker refused message for {routing_key}: {exc}") from exc
            except aio_pika.exceptions.PublishError as exc:
                raise BusError(f"message for {routing_key} was unroutable: {exc}") from exc
            except _RETRYABLE as exc:
                if loop.time() >= deadline:
                    raise BusError(f"cannot publish to {routing_key}: {exc}") from exc
                log.warning("publish_retry", routing_key=routing_key, error=repr(exc))
                self._declared.clear()
                await asyncio.sleep(0.2)

    # -- consuming -----------------------------------------------------------

    async def consume(
        self,
        queue: str,
        handler: Handler,
        *,
        prefetch: int,
        codec: Codec,
        attempts: int = CONSUME_ATTEMPTS,
    ) -> AmqpSubscription:
        """Start consuming `queue`. A broker error while starting is retried with a
        pause (up to `attempts` tries, each bounded): RabbitMQ may answer a consume
        of a quorum queue another process has just declared with INTERNAL_ERROR
        (its replica not started yet) and close the connection, which then
        reconnects."""
        for attempt in range(1, attempts + 1):
            channel: AbstractChannel | None = None
            try:
                async with asyncio.timeout(CONSUME_ATTEMPT_SECONDS):
                    await self._connection.connected.wait()
                    channel = await self._connection.channel()
                    await channel.set_qos(prefetch_count=prefetch)
                    amqp_queue = await self._declare(channel, queue)
                    sub = AmqpSubscription(
                        self, queue, channel, amqp_queue, handler, codec, prefetch=prefetch
                    )
                    await sub.start()
                    return sub
            except (*_RETRYABLE, aiormq.exceptions.AMQPError) as exc:
                if channel is not None and not channel.is_closed:
                    with contextlib.suppress(*_RETRYABLE, aiormq.exceptions.AMQPError):
                        await channel.close()
                if attempt == attempts:
                    raise BusError(f"cannot consume {queue}: {exc!r}") from exc
                log.warning("consume_retry", queue=queue, attempt=attempt, error=repr(exc))
                await asyncio.sleep(min(2.0, 0.2 * 2**attempt))
        raise AssertionError("unreachable")

    async def _dead_letter(self, queue: str, body: bytes, error: str) -> None:
        await self._publish(self._dlx_name, queue, body, headers={ERROR_HEADER: error[:4000]})

    async def _send_again(self, queue: str, bodies: Sequence[bytes], *, attempts: int) -> None:
        """Queue bundles' members, each alone, to be delivered again after `attempts`
        deliveries (one confirm wait for all)."""
        headers = {ATTEMPTS_HEADER: attempts}
        await self._publish_chunks(
            [(queue, _amqp_message(body, message_id=None, kind=None, headers=headers)) for body in bodies]
        )

    async def dead_letters(self, queue: str, *, limit: int = 100, wait: float = 30.0) -> list[DeadLetter]:
        """Take up to `limit` dead letters of `queue` (waiting up to `wait` seconds
        for the connection if it is being re-established)."""
        try:
            async with asyncio.timeout(wait):
                await self._connection.connected.wait()
        except TimeoutError as exc:
            raise BusError(f"cannot read the dead letters of {queue}: not connected") from exc
        channel = await self._connection.channel()
        try:
            await self._declare(channel, queue)
            dead = await channel.get_queue(f"{self.queue_name(queue)}.dead", ensure=False)
            letters: list[DeadLetter] = []
            while len(letters) < limit:
                incoming = await dead.get(no_ack=False, fail=False)
                if incoming is None:
                    break
                error = _error_of(incoming)
                try:  # a bundle the broker gave up on (its delivery limit): each member
                    bodies = (
                        bundles.decode(incoming.body)
                        if incoming.content_type == bundles.CONTENT_TYPE
                        else [incoming.body]
                    )
                except MessageRejected:
                    bodies = [incoming.body]
                letters.extend(DeadLetter(queue, body, error) for body in bodies)
                await incoming.ack()
            return letters
        finally:
            await channel.close()

    async def close(self) -> None:
        await self._connection.close()


class AmqpSubscription:
    def __init__(
        self,
        bus: AmqpBus,
        queue: str,
        channel: AbstractChannel,
        amqp_queue: AbstractQueue,
        handler: Handler,
        codec: Codec,
        *,
        prefetch: int,
    ) -> None:
        self._codec = codec
        self._bus, self._queue, self._channel = bus, queue, channel
        self._amqp_queue, self._handler = amqp_queue, handler
        self._inflight: set[asyncio.Task[None]] = set()
        self._tag: str | None = None
        self._replies = _ReplyBatches(bus, queue)
        # Handlers running at once: the prefetch bounds deliveries, this the messages
        # (a bundle is one delivery of many).
        self._slots = asyncio.Semaphore(prefetch)
        self._stopping = asyncio.Event()  # cuts short the pauses of delayed requeues

    async def start(self) -> None:
        self._tag = await self._amqp_queue.consume(self._on_message)

    async def _on_message(self, incoming: AbstractIncomingMessage) -> None:
        # Return at once: handlers run concurrently, bounded by the prefetch.
        task = asyncio.create_task(self._handle(incoming), name=f"handle:{self._queue}")
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    async def _handle(self, incoming: AbstractIncomingMessage) -> None:
        headers = incoming.headers or {}
        count, earlier = headers.get("x-delivery-count", 0), headers.get(ATTEMPTS_HEADER, 0)
        previous = (count if isinstance(count, int) else 0) + (earlier if isinstance(earlier, int) else 0)
        delivery = Delivery(self._queue, previous + 1, bool(incoming.redelivered) or previous > 0)
        if incoming.content_type == bundles.CONTENT_TYPE:
            await self._handle_bundle(incoming, delivery)
        else:
            await self._settle(incoming, await self._member(incoming.body, delivery))

    async def _member(self, body: bytes, delivery: Delivery, *, slot_held: bool = False) -> Verdict:
        """Handle one message (alone, or a bundle's member) as far as its verdict, its
        replies published; at most `prefetch` at once, bundles' members included (with
        `slot_held` the caller took this one's slot already)."""
        if not slot_held:
            await self._slots.acquire()
        try:
            verdict = await dispatch(
                body,
                delivery,
                codec=self._codec,
                handler=self._handler,
                max_deliveries=self._bus._max_deliveries,
            )
        finally:
            self._slots.release()
        if verdict.action is Action.REQUEUE and verdict.delay > 0:
            # Held unacknowledged for the pause: a consumer that dies meanwhile
            # leaves it to the broker, which delivers it again at once.
            await hold(verdict.delay, until=self._stopping)
        return await with_replies_published(
            verdict, delivery, publish=self._replies.publish, max_deliveries=self._bus._max_deliveries
        )

    async def _handle_bundle(self, incoming: AbstractIncomingMessage, delivery: Delivery) -> None:
        """Handle as many members of a bundle as this consumer has free handlers for, each
        as its own delivery; send the others back to the queue at once, alone, for any
        consumer to take (a busy consumer must not sit on work an idle one could do).
        Acknowledge the bundle once each member is done: handled, dead-lettered alone, or
        (to be delivered again) sent again alone, carrying its deliveries so far. Until
        then the bundle is unacknowledged: a consumer that dies meanwhile leaves it all to
        the broker, and its members, handled or not, come again (receivers are idempotent)."""
        try:
            members = bundles.decode(incoming.body)
        except MessageRejected as exc:
            log.warning("message_rejected", queue=self._queue, reason=str(exc))
            await self._settle(incoming, Verdict(Action.DEAD_LETTER, f"rejected: {exc}"))
            return
        taken = 0
        while taken < len(members) and not self._slots.locked():
            await self._slots.acquire()  # free: returns at once
            taken += 1
        held = taken
        if taken < len(members):
            try:  # not counted as a delivery: none was tried
                await self._bus._send_again(self._queue, members[taken:], attempts=delivery.attempt - 1)
            except (*_RETRYABLE, aiormq.exceptions.AMQPError, BusError) as exc:
                log.warning("bundle_members_not_passed_on", queue=self._queue, error=repr(exc))
                taken = len(members)  # handled here, waiting for handlers as they free up
        verdicts = await asyncio.gather(
            *(self._member(body, delivery, slot_held=i < held) for i, body in enumerate(members[:taken]))
        )
        done = list(zip(members[:taken], verdicts, strict=True))
        try:
            for body, verdict in done:
                if verdict.action is Action.DEAD_LETTER:
                    await self._bus._dead_letter(self._queue, body, verdict.error)
            again = [body for body, verdict in done if verdict.action is Action.REQUEUE]
            if again:
                await self._bus._send_again(self._queue, again, attempts=delivery.attempt)
        except (*_RETRYABLE, aiormq.exceptions.AMQPError, BusError) as exc:
            log.warning("bundle_members_not_sent_again", queue=self._queue, error=repr(exc))
            await self._settle(incoming, Verdict(Action.REQUEUE, repr(exc)))
            return
        await self._settle(incoming, ACK)

    async def _settle(self, incoming: AbstractIncomingMessage, verdict: Verdict) -> None:
        try:
            if verdict.action is Action.DEAD_LETTER:
                await self._bus._dead_letter(self._queue, incoming.body, verdict.error)
                await incoming.ack()
            elif verdict.action is Action.REQUEUE:
                await incoming.nack(requeue=True)
            else:
                await incoming.ack()
        except (*_RETRYABLE, aiormq.exceptions.AMQPError, BusError) as exc:
            # The channel went away: the broker will deliver the message again.
            log.warning("settle_lost", queue=self._queue, action=verdict.action.value, error=repr(exc))

    async def stop(self) -> None:
        """Drain: cancel the consumer, let in-flight handlers finish and ack; a message
        held for a delayed redelivery goes back at once."""
        if self._tag is not None:
            try:
                await self._amqp_queue.cancel(self._tag)
            except (*_RETRYABLE, aiormq.exceptions.AMQPError) as exc:
                log.warning("consumer_cancel_failed", queue=self._queue, error=repr(exc))
            self._tag = None
        self._stopping.set()
        if self._inflight:
            await asyncio.wait(list(self._inflight))
        await self._channel.close()


class _ReplyBatches:
    """Handlers' replies, published in batches: one batch is being confirmed at a time;
    replies that come meanwhile wait and go together in the next (group commit)."""

    def __init__(self, bus: AmqpBus, queue: str) -> None:
        self._bus, self._queue = bus, queue
        self._waiting: list[tuple[Sequence[Outgoing], asyncio.Future[None]]] = []
        self._sender: asyncio.Task[None] | None = None

    async def publish(self, replies: Sequence[Outgoing]) -> None:
        """Return once `replies` are confirmed, with the batch they went in; `BusError` if not."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((replies, done))
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send(), name=f"replies:{self._queue}")
        await done

    async def _send(self) -> None:
        await asyncio.sleep(0)  # handlers finishing in this turn of the loop join the first batch
        while self._waiting:
            batch, self._waiting = self._waiting, []
            try:
                await self._bus.publish_batch([reply for replies, _ in batch for reply in replies])
            except BusError as exc:
                for _, done in batch:
                    if not done.done():
                        done.set_exception(exc)
                continue
            except BaseException:  # cancelled (or a bug): nothing is acknowledged, all come again
                for _, done in batch:
                    done.cancel()
                raise
            for _, done in batch:
                if not done.done():
                    done.set_result(None)


class _Out(NamedTuple):
    """A message to publish, encoded."""

    queue: str
    body: bytes
    message_id: str | None
    kind: str | None


def _encoded(outgoing: Sequence[Outgoing]) -> list[_Out]:
    return [_Out(out.queue, out.message.encode(), out.message.id, out.message.kind) for out in outgoing]


def _amqp_message(
    body: bytes,
    *,
    message_id: str | None,
    kind: str | None,
    headers: dict[str, Any] | None = None,
    bundle: bool = False,
) -> aio_pika.Message:
    return aio_pika.Message(
        body,
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        content_type=bundles.CONTENT_TYPE if bundle else "application/json",
        message_id=message_id,
        type=kind,
        headers=headers or {},
    )


def _error_of(incoming: AbstractIncomingMessage) -> str:
    headers = incoming.headers or {}
    error = headers.get(ERROR_HEADER)
    if isinstance(error, bytes):
        return error.decode(errors="replace")
    if isinstance(error, str):
        return error
    deaths = headers.get("x-death")
    if isinstance(deaths, list) and deaths and isinstance(deaths[0], dict):
        reason = deaths[0].get("reason", "unknown")
        shown = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        return f"dead-lettered by broker: {shown}"
    return "dead-lettered by broker"


def _log_reconnect(*_: Any) -> None:
    log.info("amqp_reconnected")
