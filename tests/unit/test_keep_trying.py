"""Proves `shared.waiting.keep_trying`: it retries listed errors until the bound,
then raises the last one; other errors go through at once."""

from __future__ import annotations

import pytest

from shared.waiting import keep_trying


class Flaky:
    def __init__(self, failures: int, error: Exception) -> None:
        self.failures, self.error, self.calls = failures, error, 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "connected"


async def test_a_dependency_that_comes_up_within_the_bound_is_waited_for() -> None:
    flaky = Flaky(3, ConnectionRefusedError("down"))
    got = await keep_trying(flaky, retry_on=(OSError,), wait=60, waiting_event="waiting", first=0.001)
    assert (got, flaky.calls) == ("connected", 4)


async def test_past_the_bound_the_last_error_is_raised() -> None:
    flaky = Flaky(1000, ConnectionRefusedError("still down"))
    with pytest.raises(ConnectionRefusedError, match="still down"):
        await keep_trying(flaky, retry_on=(OSError,), wait=0.05, waiting_event="waiting", first=0.01)
    assert 2 <= flaky.calls < 1000


async def test_an_error_not_listed_is_not_retried() -> None:
    flaky = Flaky(1, PermissionError("bad password"))
    with pytest.raises(PermissionError):
        await keep_trying(flaky, retry_on=(ConnectionError,), wait=60, waiting_event="waiting", first=0.001)
    assert flaky.calls == 1
