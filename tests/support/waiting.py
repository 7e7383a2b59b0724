"""Waiting in tests: poll a condition within a generous bound, never sleep a fixed time.

Where it sits: the test-side sibling of `shared.waiting.keep_trying` (which
waits for a dependency at start-up). A test that waits for something to
become true (a row, a message handled, a log line, a process gone) calls
`eventually`; the harnesses' `settled` (tests/support/convergence.py,
distributed.py, service_cluster.py) wait for a stack's operation to end with
`stack_settled`. Code that blocks (heatclient, in a worker thread) waits
with `eventually_blocking`. A bound only limits how long a broken run takes: a slow
machine makes the wait longer, never the test fail. When the bound passes,
the error says what was awaited and what was last seen.
"""

from __future__ import annotations

import asyncio
import inspect
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

import asyncpg

T = TypeVar("T")


@overload
async def eventually(
    probe: Callable[[], Awaitable[T | None]],
    *,
    timeout: float = ...,
    every: float = ...,
    what: str | None = ...,
) -> T: ...


@overload
async def eventually(
    probe: Callable[[], T | None], *, timeout: float = ..., every: float = ..., what: str | None = ...
) -> T: ...


async def eventually(
    probe: Callable[[], Any],
    *,
    timeout: float = 30.0,
    every: float = 0.05,
    what: str | None = None,
) -> Any:
    """The first truthy result of `probe()` (awaited when it is awaitable), tried every
    `every` seconds for up to `timeout`; then AssertionError naming `what` (or the probe)
    and its last result. An error the probe raises is not caught: it ends the wait."""
    last: Any = None
    waiting = asyncio.timeout(timeout)
    try:
        async with waiting:
            while True:
                last = probe()
                if inspect.isawaitable(last):
                    last = await last
                if last:
                    return last
                await asyncio.sleep(every)
    except TimeoutError:
        if not waiting.expired():
            raise  # the probe's own
        name = what or getattr(probe, "__qualname__", repr(probe))
        raise AssertionError(f"{name} did not hold within {timeout} s (last: {last!r})") from None


def eventually_blocking(
    probe: Callable[[], T | None], *, timeout: float = 30.0, every: float = 0.05, what: str | None = None
) -> T:
    """`eventually` for blocking code (not on an event loop): `probe()`'s first truthy result."""
    deadline = time.monotonic() + timeout
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() > deadline:
            name = what or getattr(probe, "__qualname__", repr(probe))
            raise AssertionError(f"{name} did not hold within {timeout} s (last: {last!r})")
        time.sleep(every)


async def stack_settled(
    pool: asyncpg.Pool,
    stack_id: uuid.UUID,
    *,
    timeout: float = 30.0,
    every: float = 0.05,
    unavailable: tuple[type[BaseException], ...] = (),
) -> tuple[str, str, str]:
    """(action, status, reason) of the stack once its operation has ended (its status is not
    IN_PROGRESS), read from the database every `every` seconds for up to `timeout`. Errors
    of the `unavailable` types (a database outage the test causes) count as not yet."""

    async def ended() -> tuple[str, str, str] | None:
        try:
            row = await pool.fetchrow(
                "SELECT action, status, status_reason FROM stacks WHERE stack_id = $1", stack_id
            )
        except unavailable:
            return None
        assert row is not None, f"no stack {stack_id}"
        if row["status"] == "IN_PROGRESS":
            return None
        return row["action"], row["status"], row["status_reason"]

    return await eventually(ended, timeout=timeout, every=every, what=f"stack {stack_id} settled")
