"""Proves OS::Heat::Delay's pause: min_wait plus a jitter fixed by the action's key, only
during the listed actions, watched (not slept) until it ends; pure, on virtual time."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from shared.errors import PermanentError
from shared.plugins import ObservedState, Outcome
from shared.plugins.builtin.delay import Delay, DelayProperties, wait_seconds
from tests.unit.plugins.plugin_fakes import CtxFactory, VirtualClock


def test_the_jitter_is_within_its_range_and_the_same_for_one_action() -> None:
    props = DelayProperties(min_wait=10, max_jitter=4, jitter_multiplier=0.5)
    waits = [wait_seconds(props, "create", f"job-{i}") for i in range(200)]
    assert all(10 <= w < 12 for w in waits)
    assert len(set(waits)) > 100, "different actions draw different jitters"
    assert wait_seconds(props, "create", "job-1") == waits[1], "a redelivered job pauses the same"
    assert wait_seconds(props, "delete", "job-1") == 0, "DELETE is not listed"


async def test_a_create_returns_at_once_and_is_watched_until_the_pause_ends(
    make_ctx: CtxFactory, clock: VirtualClock
) -> None:
    props = DelayProperties(min_wait=30)
    result = await Delay().create(make_ctx(), props)
    assert result.outcome is Outcome.IN_PROGRESS
    assert result.physical_id is not None
    clock.advance(20)
    seen = await Delay().observe(make_ctx(idempotency_key="obs"), result.physical_id, props)
    assert seen.state is ObservedState.IN_PROGRESS
    assert seen.retry_after == pytest.approx(10)
    clock.advance(10)
    seen = await Delay().observe(make_ctx(idempotency_key="obs"), result.physical_id, props)
    assert seen.state is ObservedState.READY
    assert seen.physical_id is not None
    assert result.physical_id.startswith(seen.physical_id)


async def test_a_listed_delete_pauses_then_is_gone_and_an_update_never_pauses(
    make_ctx: CtxFactory, clock: VirtualClock
) -> None:
    props = DelayProperties(min_wait=5, actions=["DELETE"])
    made = await Delay().create(make_ctx(), props)
    assert made.outcome is Outcome.COMPLETE
    assert made.physical_id is not None
    updated = await Delay().update(make_ctx(), made.physical_id, props, DelayProperties(min_wait=9))
    assert updated.outcome is Outcome.COMPLETE
    deleting = await Delay().delete(make_ctx(idempotency_key="del"), made.physical_id, props)
    assert deleting.outcome is Outcome.IN_PROGRESS
    assert deleting.physical_id is not None
    clock.advance(5)
    seen = await Delay().observe(make_ctx(), deleting.physical_id, props)
    assert seen.state is ObservedState.GONE


async def test_a_pause_past_the_deadline_fails_at_once(make_ctx: CtxFactory, clock: VirtualClock) -> None:
    with pytest.raises(PermanentError, match="delay of 700s exceeds the stack operation's timeout"):
        await Delay().create(make_ctx(deadline=clock() + 600), DelayProperties(min_wait=700))


def test_unknown_actions_and_overlong_pauses_are_refused() -> None:
    with pytest.raises(ValidationError, match="actions"):
        DelayProperties.model_validate({"actions": ["UPDATE"]})
    with pytest.raises(ValidationError, match="more than the longest delay"):
        DelayProperties(min_wait=43000, max_jitter=100, jitter_multiplier=3)
