"""What to do with one delivery: decode, run the handler, decide the verdict.

Both bus implementations call `dispatch` for every delivery and then act on
the verdict (ack, requeue — at once or after a pause — or dead-letter with
the reason; an ack may carry the replies the handler returned, published
before the ack), so their semantics cannot drift apart. This is the outermost
consumer boundary: the one place a handler's arbitrary exception is caught,
logged and turned into redelivery or a dead letter.

The error's type decides (`verdict_for`, pure; see `shared.errors`):
- `Abandoned` (the handler is shutting down): requeued at once; never a failure;
- `PermanentError`: dead-lettered on this delivery with its reason, since
  retrying cannot help;
- `TransientError`: requeued after its `retry_after` (at most
  `MAX_RETRY_AFTER`; at once when it names none), counting as a failed delivery;
- anything else — including a `ConflictError` that outlasted the handler's own
  retries (the engine retries conflicts inside its handler,
  `services.engine.conflicts`) — requeued at once.
A failed delivery that was the last allowed (`max_deliveries`) is dead-lettered
with the last error. Cancellation is never swallowed: a cancelled handler leaves
its message unacknowledged, to be delivered again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

import structlog

from shared.bus.base import Delivery, Handler, Outgoing
from shared.errors import Abandoned, BusError, MessageRejected, PermanentError, TransientError
from shared.logging import log_context
from shared.messages import Codec

log = structlog.get_logger(__name__)

#: The longest pause a `TransientError.retry_after` buys. The message stays with
#: its consumer meanwhile (unacknowledged, holding a prefetch slot), so the pause
#: is kept short; a longer outage is ridden out by the message's later deliveries.
MAX_RETRY_AFTER = 60.0


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
    delay: float = 0.0  # seconds to hold a REQUEUE before the message goes back


ACK = Verdict(Action.ACK)


def failure_verdict(error: str, *, attempt: int, max_deliveries: int, delay: float = 0.0) -> Verdict:
    """A failed handler is retried (after `delay`) until its last allowed delivery."""
    if attempt >= max_deliveries:
        return Verdict(Action.DEAD_LETTER, f"failed {attempt} deliveries; last error: {error}")
    return Verdict(Action.REQUEUE, error, delay=delay)


def verdict_for(exc: Exception, *, attempt: int, max_deliveries: int) -> Verdict:
    """What a handler's exception on delivery `attempt` (1-based) does to its message. Pure."""
    if isinstance(exc, Abandoned):
        return Verdict(Action.REQUEUE, "abandoned")
    error = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, PermanentError):
        return Verdict(Action.DEAD_LETTER, f"permanent error on delivery {attempt}, not retried: {error}")
    delay = 0.0
    if isinstance(exc, TransientError) and exc.retry_after is not None:
        delay = min(MAX_RETRY_AFTER, max(0.0, exc.retry_after))
    return failure_verdict(error, attempt=attempt, max_deliveries=max_deliveries, delay=delay)


async def dispatch(
    body: bytes, delivery: Delivery, *, codec: Codec, handler: Handler, max_deliveries: int
) -> Verdict:
    try:
        message = codec.decode(body)
    except MessageRejected as exc:
        log.warning("message_rejected", queue=delivery.queue, reason=str(exc))
        return Verdict(Action.DEAD_LETTER, f"rejected: {exc}")
    with log_context(message_id=message.id, kind=message.kind):
        try:
            replies = await handler(message, delivery)
        except Abandoned:
            log.info("message_abandoned", queue=delivery.queue, attempt=delivery.attempt)
            return Verdict(Action.REQUEUE, "abandoned")
        except Exception as exc:  # outermost consumer boundary (see docstring)
            verdict = verdict_for(exc, attempt=delivery.attempt, max_deliveries=max_deliveries)
            log.warning(
                "handler_failed",
                queue=delivery.queue,
                attempt=delivery.attempt,
                verdict=verdict.action.value,
                retry_in=verdict.delay or None,
                error=f"{type(exc).__name__}: {exc}",
                reason=verdict.error if verdict.action is Action.DEAD_LETTER else None,
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


async def hold(delay: float, *, until: asyncio.Event) -> None:
    """Pause a delayed requeue for `delay` seconds, or less once `until` is set
    (the subscription is stopping: the message goes back at once)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(delay):
            await until.wait()
