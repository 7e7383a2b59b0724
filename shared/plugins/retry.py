"""Retrying plugin actions that fail transiently: backoff, jitter, deadline.

Where it sits: the worker wraps each plugin action (`create`, `update`,
`delete`, `observe`) in `call_with_retry`. A `TransientError` (connection
lost, 429, 5xx) is retried after an exponentially growing, jittered pause —
never shorter than the server's Retry-After — until the next attempt could
not start before the job's deadline; then the last error is raised for the
worker to report. Every other error passes through on the first raise.

`next_delay` is the pure decision; `call_with_retry` is the thin loop, with
clock, sleep and randomness injected so tests run on virtual time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import structlog

from shared.errors import TransientError

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """Backoff shape. Delays in seconds.

    Attempt n (1-based) waits about `initial * multiplier**(n-1)`, capped at
    `maximum`, then reduced by up to `jitter` (a fraction) so that many
    workers retrying the same outage spread out instead of arriving together.
    """

    initial: float = 0.5
    multiplier: float = 2.0
    maximum: float = 30.0
    jitter: float = 0.5
    max_attempts: int | None = None  # None: bounded by the deadline only


DEFAULT_RETRY_POLICY = RetryPolicy()


def next_delay(policy: RetryPolicy, attempt: int, *, retry_after: float | None, random: float) -> float:
    """Pause before the retry that follows failed attempt `attempt`. Pure.

    `random` is a uniform draw in [0, 1).
    """
    base = min(policy.maximum, policy.initial * policy.multiplier ** (attempt - 1))
    delay = base * (1.0 - policy.jitter * random)
    if retry_after is not None:
        delay = max(delay, retry_after)
    return delay


async def call_with_retry(
    action: Callable[[], Awaitable[T]],
    *,
    deadline: float,
    clock: Callable[[], float],
    sleep: Callable[[float], Awaitable[None]],
    random: Callable[[], float],
    policy: RetryPolicy = DEFAULT_RETRY_POLICY,
    log: structlog.typing.FilteringBoundLogger | None = None,
) -> T:
    """Run `action` until it succeeds, fails permanently, or time runs out.

    `deadline` is an instant on `clock`. A retry is not started when its
    pause would end at or after the deadline: the last `TransientError` is
    raised instead.
    """
    attempt = 0
    while True:
        attempt += 1
        try:
            return await action()
        except TransientError as exc:
            delay = next_delay(policy, attempt, retry_after=exc.retry_after, random=random())
            out_of_attempts = policy.max_attempts is not None and attempt >= policy.max_attempts
            if out_of_attempts or clock() + delay >= deadline:
                raise
            if log is not None:
                log.info("action_retry", attempt=attempt, delay=round(delay, 3), error=str(exc))
            await sleep(delay)
