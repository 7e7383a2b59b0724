"""Bus interface types shared by both implementations (see `shared.bus`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from shared.messages import Codec, Message


@dataclass(frozen=True)
class Delivery:
    """Facts about one delivery of a message, handed to the handler."""

    queue: str
    attempt: int  # 1 for the first delivery
    redelivered: bool


@dataclass(frozen=True)
class Outgoing:
    """A message a handler asks the bus to publish for it (to `queue`)."""

    queue: str
    message: Message


#: A handler may return messages to publish (its replies): the bus publishes them,
#: batched with other handlers' replies (one confirm wait for the batch), and acknowledges
#: the delivery only once they are confirmed; if they cannot be published, the delivery
#: is not acknowledged and comes again.
Handler = Callable[[Message, Delivery], Awaitable[Sequence[Outgoing] | None]]


@dataclass(frozen=True)
class DeadLetter:
    """A message the bus gave up on, with why."""

    queue: str
    body: bytes
    error: str


class Subscription(Protocol):
    async def stop(self) -> None:
        """Stop taking deliveries; wait for in-flight handlers to finish and ack."""


class Bus(Protocol):
    async def publish(self, queue: str, message: Message) -> None:
        """Queue `message`; returns once the broker has it (confirm)."""

    async def publish_many(self, queue: str, messages: Sequence[Message]) -> None:
        """Queue several messages, waiting for all confirms together."""

    async def publish_batch(self, outgoing: Sequence[Outgoing]) -> None:
        """Queue messages for any queues; returns once the broker has them all (one confirm
        wait for the batch)."""

    async def publish_raw(self, queue: str, body: bytes) -> None:
        """Queue an already-encoded body, e.g. to replay a dead letter."""

    async def publish_raw_batch(self, bodies: Sequence[tuple[str, bytes]]) -> None:
        """Queue already-encoded (queue, body) pairs; returns once the broker has them all
        (one confirm wait for the batch)."""

    async def depth(self, queue: str) -> int:
        """Messages waiting in `queue` (not counting those in flight)."""

    async def consume(self, queue: str, handler: Handler, *, prefetch: int, codec: Codec) -> Subscription:
        """Start handling `queue` with at most `prefetch` messages in flight;
        `codec` names the message kinds this consumer accepts."""

    async def dead_letters(self, queue: str, *, limit: int = 100) -> list[DeadLetter]:
        """Take up to `limit` dead letters of `queue` (for operators and tests)."""

    async def close(self) -> None:
        """Close connections. Subscriptions should be stopped first."""
