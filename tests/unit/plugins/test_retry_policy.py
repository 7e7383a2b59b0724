"""Proves the action retry loop's backoff, jitter, Retry-After and deadline; pure, on
virtual time (injected clock, sleep and random)."""

from __future__ import annotations

import pytest

from shared.errors import PermanentError, TransientError
from shared.plugins.retry import RetryPolicy, call_with_retry, next_delay


class Timeline:
    """Virtual time: sleeping moves the clock; every pause is recorded."""

    def __init__(self) -> None:
        self.now = 0.0
        self.pauses: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds


class Flaky:
    """Fails transiently `failures` times, then returns "done"."""

    def __init__(self, failures: int, retry_after: float | None = None) -> None:
        self.failures = failures
        self.retry_after = retry_after
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise TransientError("503", retry_after=self.retry_after)
        return "done"


def test_delay_grows_exponentially_up_to_the_maximum() -> None:
    policy = RetryPolicy(initial=1, multiplier=2, maximum=5, jitter=0)
    delays = [next_delay(policy, n, retry_after=None, random=0.0) for n in range(1, 6)]
    assert delays == [1, 2, 4, 5, 5]


def test_jitter_shortens_the_delay_by_at_most_its_fraction() -> None:
    policy = RetryPolicy(initial=4, jitter=0.5)
    assert next_delay(policy, 1, retry_after=None, random=0.0) == 4
    assert next_delay(policy, 1, retry_after=None, random=0.999) == pytest.approx(2, abs=0.01)


def test_retry_after_is_a_lower_bound() -> None:
    policy = RetryPolicy(initial=1, jitter=0)
    assert next_delay(policy, 1, retry_after=9, random=0.0) == 9


async def test_transient_failures_are_retried_until_success() -> None:
    time, action = Timeline(), Flaky(failures=3)
    policy = RetryPolicy(initial=1, multiplier=2, jitter=0)
    result = await call_with_retry(
        action, deadline=100, clock=time.clock, sleep=time.sleep, random=lambda: 0.0, policy=policy
    )
    assert result == "done"
    assert time.pauses == [1, 2, 4]


async def test_server_retry_after_is_respected() -> None:
    time, action = Timeline(), Flaky(failures=1, retry_after=20)
    await call_with_retry(
        action,
        deadline=100,
        clock=time.clock,
        sleep=time.sleep,
        random=lambda: 0.0,
        policy=RetryPolicy(initial=1, jitter=0),
    )
    assert time.pauses == [20]


async def test_gives_up_with_the_last_error_when_the_deadline_would_pass() -> None:
    time, action = Timeline(), Flaky(failures=100)
    with pytest.raises(TransientError, match="503"):
        await call_with_retry(
            action,
            deadline=10,
            clock=time.clock,
            sleep=time.sleep,
            random=lambda: 0.0,
            policy=RetryPolicy(initial=1, multiplier=2, jitter=0),
        )
    assert time.pauses == [1, 2, 4]  # the next pause (8) would end at 15 > 10
    assert time.now < 10


async def test_max_attempts_bounds_the_retries() -> None:
    time, action = Timeline(), Flaky(failures=100)
    with pytest.raises(TransientError):
        await call_with_retry(
            action,
            deadline=1e9,
            clock=time.clock,
            sleep=time.sleep,
            random=lambda: 0.0,
            policy=RetryPolicy(max_attempts=3),
        )
    assert action.calls == 3


async def test_permanent_errors_are_not_retried() -> None:
    time = Timeline()
    calls = 0

    async def broken() -> None:
        nonlocal calls
        calls += 1
        raise PermanentError("400")

    with pytest.raises(PermanentError):
        await call_with_retry(broken, deadline=100, clock=time.clock, sleep=time.sleep, random=lambda: 0.5)
    assert calls == 1
    assert time.pauses == []
