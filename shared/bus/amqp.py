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
(`publish_batch`, and the replies handlers return) is written at once and
its confirms awaited together under one timeout; the replies of handlers
that finish while a batch is being confirmed go in the next one (group
commit), and each delivery is acknowledged only after its replies are
confirmed. The connection is
robust: after a broker-side close it reconnects and restores channels,
queues and consumers; a publish during the outage waits for the channel to
come back, within `publish_timeout`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import aio_pika
import aiormq
import structlog
from aio_pika.abc import (
    AbstractChannel,
    AbstractIncomingMessage,
    AbstractQueue,
    AbstractRobustConnection,
)

from shared.bus.base import DeadLetter, Delivery, Handler, Outgoing
from shared.bus.dispatch import Action, Verdict, dispatch, hold, with_replies_published
from shared.errors import BusError
from shared.messages import Codec, Message
from shared.settings import MAX_DELIVERIES
from shared.waiting import keep_trying

log = structlog.get_logger(__name__)

ERROR_HEADER = "x-converge-error"
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
    ) -> None:
        self._connection = connection
        self._publish_channel = publish_channel
        self._prefix = prefix
        self._max_deliveries = max_deliveries
        self._publish_timeout = publish_timeout
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
        await self._publish_together([(out.queue, _message_of(out.message)) for out in outgoing])

    async def publish_raw_batch(self, bodies: Sequence[tuple[str, bytes]]) -> None:
        await self._publish_together(
            [(queue, _amqp_message(body, message_id=None, kind=None)) for queue, body in bodies]
        )

    async def _publish_together(self, messages: Sequence[tuple[str, aio_pika.Message]]) -> None:
        """Write every (queue, message) at once and wait for their confirms together, in
        chunks of `CONFIRM_CHUNK` (each confirmed within `CONFIRM_SECONDS`)."""
        for start in range(0, len(messages), CONFIRM_CHUNK):
            await self._publish_chunk(messages[start : start + CONFIRM_CHUNK])

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
                    sub = AmqpSubscription(self, queue, channel, amqp_queue, handler, codec)
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
                letters.append(DeadLetter(queue, incoming.body, _error_of(incoming)))
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
    ) -> None:
        self._codec = codec
        self._bus, self._queue, self._channel = bus, queue, channel
        self._amqp_queue, self._handler = amqp_queue, handler
        self._inflight: set[asyncio.Task[None]] = set()
        self._tag: str | None = None
        self._replies = _ReplyBatches(bus, queue)
        self._stopping = asyncio.Event()  # cuts short the pauses of delayed requeues

    async def start(self) -> None:
        self._tag = await self._amqp_queue.consume(self._on_message)

    async def _on_message(self, incoming: AbstractIncomingMessage) -> None:
        # Return at once: handlers run concurrently, bounded by the prefetch.
        task = asyncio.create_task(self._handle(incoming), name=f"handle:{self._queue}")
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    async def _handle(self, incoming: AbstractIncomingMessage) -> None:
        count = (incoming.headers or {}).get("x-delivery-count", 0)
        previous = count if isinstance(count, int) else 0
        delivery = Delivery(self._queue, previous + 1, bool(incoming.redelivered) or previous > 0)
        verdict = await dispatch(
            incoming.body,
            delivery,
            codec=self._codec,
            handler=self._handler,
            max_deliveries=self._bus._max_deliveries,
        )
        if verdict.action is Action.REQUEUE and verdict.delay > 0:
            # Held unacknowledged for the pause: a consumer that dies meanwhile
            # leaves it to the broker, which delivers it again at once.
            await hold(verdict.delay, until=self._stopping)
        verdict = await with_replies_published(
            verdict, delivery, publish=self._replies.publish, max_deliveries=self._bus._max_deliveries
        )
        await self._settle(incoming, verdict)

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


def _amqp_message(
    body: bytes, *, message_id: str | None, kind: str | None, headers: dict[str, Any] | None = None
) -> aio_pika.Message:
    return aio_pika.Message(
        body,
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        content_type="application/json",
        message_id=message_id,
        type=kind,
        headers=headers or {},
    )


def _message_of(message: Message) -> aio_pika.Message:
    return _amqp_message(message.encode(), message_id=message.id, kind=message.kind)


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
