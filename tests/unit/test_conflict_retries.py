"""Proves `services.engine.conflicts`: a conflicting handler runs again after
growing, jittered pauses, a bounded number of times; other errors pass through."""

from __future__ import annotations

import pytest

from services.engine.conflicts import ConflictPolicy, conflict_pause, retry_conflicts
from shared.errors import ConflictError, PermanentError


class Handler:
    def __init__(self, conflicts: int, then: Exception | None = None) -> None:
        self.conflicts, self.then, self.calls = conflicts, then, 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.conflicts:
            raise ConflictError(f"resource changed concurrently ({self.calls}); will retry")
        if self.then is not None:
            raise self.then
        return "handled"


class Sleeps:
    def __init__(self) -> None:
        self.pauses: list[float] = []

    async def __call__(self, pause: float) -> None:
        self.pauses.append(pause)


def test_pauses_grow_to_the_cap_and_stop_after_the_last_attempt() -> None:
    policy = ConflictPolicy(attempts=6, first=0.01, cap=0.05)
    pauses = [conflict_pause(policy, n, random=0.0) for n in range(1, 7)]
    assert pauses == [0.01, 0.02, 0.04, 0.05, 0.05, None]


def test_jitter_takes_off_up_to_half_a_pause() -> None:
    policy = ConflictPolicy(attempts=5, first=0.1, cap=1.0)
    assert conflict_pause(policy, 2, random=0.0) == pytest.approx(0.2)
    assert conflict_pause(policy, 2, random=0.5) == pytest.approx(0.15)
    assert conflict_pause(policy, 2, random=0.999) == pytest.approx(0.1, abs=1e-3)


def test_a_bad_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="attempts >= 1"):
        ConflictPolicy(attempts=0)


async def test_a_handler_that_conflicts_runs_again_until_it_succeeds() -> None:
    handler, sleeps = Handler(conflicts=3), Sleeps()
    got = await retry_conflicts(handler, policy=ConflictPolicy(attempts=5), sleep=sleeps, random=lambda: 0.0)
    assert (got, handler.calls) == ("handled", 4)
    assert sleeps.pauses == [0.01, 0.02, 0.04]


async def test_the_last_conflict_is_raised_once_the_attempts_are_spent() -> None:
    handler, sleeps = Handler(conflicts=100), Sleeps()
    with pytest.raises(ConflictError, match=r"\(4\)"):
        await retry_conflicts(handler, policy=ConflictPolicy(attempts=4), sleep=sleeps, random=lambda: 0.5)
    assert handler.calls == 4
    assert len(sleeps.pauses) == 3


async def test_other_errors_pass_through_on_their_first_raise() -> None:
    handler, sleeps = Handler(conflicts=0, then=PermanentError("template missing")), Sleeps()
    with pytest.raises(PermanentError):
        await retry_conflicts(handler, policy=ConflictPolicy(), sleep=sleeps, random=lambda: 0.0)
    assert (handler.calls, sleeps.pauses) == (1, [])
