"""Conflicts are retried where they happen, inside the engine's handler, never through the bus.

Where it sits: `EngineService.handle` runs each engine message through
`retry_conflicts`. A `ConflictError` means another handler changed the rows
first (a lost compare-and-swap on a resource's version, a serialization
failure or a deadlock): the handler's transaction rolled back, the message's
inbox claim with it, so running the handler again re-reads the rows and
decides again. It is run again after a short pause that grows with each
attempt and is jittered, so handlers that collided do not collide again in
step. After `ConflictPolicy.attempts` runs the last conflict goes to the bus,
which redelivers it like any other failure (`shared.bus.dispatch`); a conflict
spends a delivery only then.

`conflict_pause` is the pure decision; `retry_conflicts` the thin loop, with
sleep and randomness injected so tests need no clock.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import structlog

from shared.errors import ConflictError

log = structlog.get_logger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class ConflictPolicy:
    """How often, and after which pauses (seconds), a conflicting handler runs again.

    The pause after failed attempt n (1-based) is `first * 2**(n-1)`, capped at
    `cap`, less up to half of it at random.
    """

    attempts: int = 10
    first: float = 0.01
    cap: float = 1.0

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.first < 0 or self.cap < self.first:
            raise ValueError(f"bad conflict policy {self}: attempts >= 1 and 0 <= first <= cap")


DEFAULT_CONFLICT_POLICY = ConflictPolicy()


def conflict_pause(policy: ConflictPolicy, attempt: int, *, random: float) -> float | None:
    """The pause before running again after failed attempt `attempt`, or None when
    that was the last one. `random` is a uniform draw in [0, 1). Pure."""
    if attempt >= policy.attempts:
        return None
    base = min(policy.cap, policy.first * 2.0 ** (attempt - 1))
    return base * (1.0 - 0.5 * random)


async def retry_conflicts(
    action: Callable[[], Awaitable[T]],
    *,
    policy: ConflictPolicy,
    sleep: Callable[[float], Awaitable[None]],
    random: Callable[[], float],
) -> T:
    """`action()`'s result, running it again after a pause while it raises
    `ConflictError`, up to `policy.attempts` runs; then the last conflict is raised.
    Every other error passes through on its first raise."""
    attempt = 0
    while True:
        attempt += 1
        try:
            return await action()
        except ConflictError as exc:
            pause = conflict_pause(policy, attempt, random=random())
            if pause is None:
                log.warning("conflict_retries_spent", attempts=attempt, error=str(exc))
                raise
            log.info("conflict_retry", attempt=attempt, retry_in=round(pause, 4), error=str(exc))
            await sleep(pause)
