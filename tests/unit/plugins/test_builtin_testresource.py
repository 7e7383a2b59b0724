"""Proves OS::Heat::TestResource's knobs (wait, fail, replace, cancel); pure, on virtual time."""

from __future__ import annotations

import pytest

from shared.errors import PermanentError, TransientError
from shared.plugins import ObservedState, Outcome, ReplacementNeeded
from shared.plugins.builtin.testresource import TestResource
from shared.plugins.builtin.testresource import TestResourceProperties as Props
from tests.unit.plugins.plugin_fakes import CtxFactory, VirtualClock


async def test_create_without_wait_completes_with_value_as_output(make_ctx: CtxFactory) -> None:
    result = await TestResource().create(make_ctx(), Props(value="hello"))
    assert result.outcome is Outcome.COMPLETE
    assert result.attributes == {"output": "hello"}
    assert result.physical_id is not None
    assert result.physical_id.startswith("demo-thing-")


async def test_redelivered_create_returns_the_same_physical_id(make_ctx: CtxFactory) -> None:
    first = await TestResource().create(make_ctx(idempotency_key="job-7"), Props())
    again = await TestResource().create(make_ctx(idempotency_key="job-7"), Props())
    other = await TestResource().create(make_ctx(idempotency_key="job-8"), Props())
    assert first.physical_id == again.physical_id
    assert first.physical_id != other.physical_id


async def test_fail_makes_create_fail_permanently(make_ctx: CtxFactory) -> None:
    with pytest.raises(PermanentError, match="Test Resource failed thing"):
        await TestResource().create(make_ctx(), Props(fail=True))


async def test_create_wait_is_in_progress_until_the_time_has_passed(
    make_ctx: CtxFactory, clock: VirtualClock
) -> None:
    props = Props(value="v", action_wait_secs={"create": 30}, wait_secs=5)
    result = await TestResource().create(make_ctx(), props)
    assert result.outcome is Outcome.IN_PROGRESS
    assert result.physical_id is not None
    # observe runs with a fresh context, as it would in another process
    clock.advance(29)
    seen = await TestResource().observe(make_ctx(idempotency_key="obs"), result.physical_id, props)
    assert seen.state is ObservedState.IN_PROGRESS
    clock.advance(2)
    seen = await TestResource().observe(make_ctx(idempotency_key="obs"), result.physical_id, props)
    assert seen.state is ObservedState.READY
    assert seen.attributes == {"output": "v"}


async def test_wait_secs_applies_when_no_action_specific_wait(
    make_ctx: CtxFactory, clock: VirtualClock
) -> None:
    props = Props(wait_secs=10, action_wait_secs={"update": 99})
    result = await TestResource().create(make_ctx(), props)
    assert result.physical_id is not None
    clock.advance(11)
    seen = await TestResource().observe(make_ctx(), result.physical_id, props)
    assert seen.state is ObservedState.READY


async def test_negative_wait_never_finishes(make_ctx: CtxFactory, clock: VirtualClock) -> None:
    props = Props(wait_secs=-1)
    result = await TestResource().create(make_ctx(), props)
    assert result.physical_id is not None
    clock.advance(10**9)
    seen = await TestResource().observe(make_ctx(), result.physical_id, props)
    assert seen.state is ObservedState.IN_PROGRESS


async def test_fail_with_wait_fails_when_the_wait_ends(make_ctx: CtxFactory, clock: VirtualClock) -> None:
    props = Props(fail=True, wait_secs=5)
    result = await TestResource().create(make_ctx(), props)
    assert result.outcome is Outcome.IN_PROGRESS
    assert result.physical_id is not None
    clock.advance(6)
    seen = await TestResource().observe(make_ctx(), result.physical_id, props)
    assert seen.state is ObservedState.FAILED


async def test_value_change_updates_in_place(make_ctx: CtxFactory) -> None:
    created = await TestResource().create(make_ctx(), Props(value="a"))
    assert created.physical_id is not None
    updated = await TestResource().update(make_ctx(), created.physical_id, Props(value="a"), Props(value="b"))
    assert updated.physical_id == created.physical_id
    assert updated.attributes == {"output": "b"}


async def test_update_replace_forces_replacement_on_value_change(make_ctx: CtxFactory) -> None:
    old = Props(value="a", update_replace=True)
    with pytest.raises(ReplacementNeeded):
        await TestResource().update(make_ctx(), "pid", old, Props(value="b", update_replace=True))


async def test_switching_update_replace_on_forces_replacement(make_ctx: CtxFactory) -> None:
    with pytest.raises(ReplacementNeeded):
        await TestResource().update(make_ctx(), "pid", Props(), Props(update_replace=True))


async def test_changed_update_replace_value_forces_replacement(make_ctx: CtxFactory) -> None:
    with pytest.raises(ReplacementNeeded):
        await TestResource().update(
            make_ctx(), "pid", Props(update_replace_value="x"), Props(update_replace_value="y")
        )


async def test_fail_on_update_fails_permanently(make_ctx: CtxFactory) -> None:
    with pytest.raises(PermanentError):
        await TestResource().update(make_ctx(), "pid", Props(value="a"), Props(value="b", fail=True))


async def test_update_wait_returns_to_the_base_id_when_done(
    make_ctx: CtxFactory, clock: VirtualClock
) -> None:
    created = await TestResource().create(make_ctx(), Props(value="a"))
    assert created.physical_id is not None
    waiting = await TestResource().update(
        make_ctx(), created.physical_id, Props(value="a"), Props(value="b", wait_secs=3)
    )
    assert waiting.outcome is Outcome.IN_PROGRESS
    assert waiting.physical_id is not None
    settled = await TestResource().update(
        make_ctx(), waiting.physical_id, Props(value="b", wait_secs=3), Props(value="b", fail=False)
    )
    assert settled.physical_id == created.physical_id


async def test_delete_ignores_fail_and_completes(make_ctx: CtxFactory) -> None:
    result = await TestResource().delete(make_ctx(), "pid", Props(fail=True))
    assert result.outcome is Outcome.COMPLETE


async def test_delete_wait_reports_gone_when_the_wait_ends(make_ctx: CtxFactory, clock: VirtualClock) -> None:
    props = Props(action_wait_secs={"delete": 4})
    result = await TestResource().delete(make_ctx(), "demo-thing-abc", props)
    assert result.outcome is Outcome.IN_PROGRESS
    assert result.physical_id is not None
    assert (
        await TestResource().observe(make_ctx(), result.physical_id, props)
    ).state is ObservedState.IN_PROGRESS
    clock.advance(5)
    seen = await TestResource().observe(make_ctx(), result.physical_id, props)
    assert seen.state is ObservedState.GONE


async def test_cancelled_action_does_not_start(make_ctx: CtxFactory) -> None:
    ctx = make_ctx()
    ctx.cancelled.set()
    with pytest.raises(TransientError, match="cancelled"):
        await TestResource().create(ctx, Props())


async def test_attribute_wait_gives_up_at_once_when_cancelled(make_ctx: CtxFactory) -> None:
    ctx = make_ctx()
    ctx.cancelled.set()
    with pytest.raises(TransientError, match="cancelled"):
        await TestResource().observe(ctx, "demo-thing-abc", Props(attr_wait_secs=3600))
