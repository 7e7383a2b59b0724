"""What to do with one delivery: decode, run the handler, decide the verdict.

Both bus implementations call `dispatch` for every delivery and then act on
the verdict (ack, requeue, or dead-letter with the reason; an ack may carry the
replies the handler returned, published before the ack), so their
semantics cannot drift apart. This is the outermost consumer boundary: the
one place a handler's arbitrary exception is caught, logged and turned into
redelivery or a dead letter. A handler that raises `Abandoned` (it is
shutting down) gets its message requeued without counting a failure.
Cancellation is never swallowed: a cancelled handler leaves its message
unacknowledged, to be delivered again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

import structlog

from shared.bus.base import Delivery, Handler, Outgoing
from shared.errors import Abandoned, BusError, MessageRejected
from shared.messages import Codec

log = structlog.get_logger(__name__)


class Action(StrEnum):
    ACK = "ack"
    REQUEUE = "requeue"
    DEAD_LETTER = "dead_letter"


@dataclass(frozen=True)
class Verdict:
    action: Action
    error: str = ""
    #: ACK only: what the handler returned to publish before the delivery is acknowledged.
    replies: Sequence[Outgoing] = ()


ACK = Verdict(Action.ACK)


def failure_verdict(error: str, *, attempt: int, max_deliveries: int) -> Verdict:
    """A failed handler is retried until its last allowed delivery."""
    if attempt >= max_deliveries:
        return Verdict(Action.DEAD_LETTER, f"failed {attempt} deliveries; last error: {error}")
    return Verdict(Action.REQUEUE, error)


async def dispatch(
    body: bytes, delivery: Delivery, *, codec: Codec, handler: Handler, max_deliveries: int
) -> Verdict:
    try:
        message = codec.decode(body)
    except MessageRejected as exc:
        log.warning("message_rejected", queue=delivery.queue, reason=str(exc))
        return Verdict(Action.DEAD_LETTER, f"rejected: {exc}")
    with structlog.contextvars.bound_contextvars(message_id=message.id, kind=message.kind):
        try:
            replies = await handler(message, delivery)
        except Abandoned:
            log.info("message_abandoned", queue=delivery.queue, attempt=delivery.attempt)
            return Verdict(Action.REQUEUE, "abandoned")
        except Exception as exc:  # outermost consumer boundary (see docstring)
            error = f"{type(exc).__name__}: {exc}"
            verdict = failure_verdict(error, attempt=delivery.attempt, max_deliveries=max_deliveries)
            log.warning(
                "handler_failed",
                queue=delivery.queue,
                attempt=delivery.attempt,
                verdict=verdict.action.value,
                error=error,
                exc_info=exc,
            )
            return verdict
    return Verdict(Action.ACK, replies=tuple(replies)) if replies else ACK


async def with_replies_published(
    verdict: Verdict,
    delivery: Delivery,
    *,
    publish: Callable[[Sequence[Outgoing]], Awaitable[None]],
    max_deliveries: int,
) -> Verdict:
    """Publish an ACK's replies before it is carried out; if they cannot be published, the
    delivery counts as failed (redelivered, dead-lettered after `max_deliveries`)."""
    if not verdict.replies:
        return verdict
    try:
        await publish(verdict.replies)
    except BusError as exc:
        error = f"replies not published: {exc}"
        log.warning("replies_not_published", queue=delivery.queue, attempt=delivery.attempt, error=error)
        return failure_verdict(error, attempt=delivery.attempt, max_deliveries=max_deliveries)
    return verdict
