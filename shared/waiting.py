"""Waiting for a dependency at start-up: try, pause, try again, within a bound.

Where it sits: the bus (`shared.bus.amqp.AmqpBus.connect`) and the engine's
store (`services.engine.store.db.connect`) open their first connection
through `keep_trying`, so a service started before RabbitMQ or PostgreSQL
waits for them (`CONVERGE_CONNECT_WAIT_SECONDS`) instead of exiting.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import structlog

log = structlog.get_logger(__name__)

T = TypeVar("T")


async def keep_trying(
    attempt: Callable[[], Awaitable[T]],
    *,
    retry_on: tuple[type[BaseException], ...],
    wait: float,
    waiting_event: str,
    first: float = 0.5,
    cap: float = 5.0,
) -> T:
    """`attempt()`'s result; while it raises one of `retry_on`, log `waiting_event`
    and try again after a growing pause, for up to `wait` seconds in all. The last
    error is raised when the next try would come after that."""
    loop = asyncio.get_running_loop()
    deadline, pause = loop.time() + wait, first
    while True:
        try:
            return await attempt()
        except retry_on as exc:
            if loop.time() + pause > deadline:
                raise
            log.warning(waiting_event, error=repr(exc), retry_in=pause)
            await asyncio.sleep(pause)
            pause = min(cap, pause * 2)
