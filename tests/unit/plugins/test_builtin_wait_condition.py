"""Proves the wait-condition handle's signal URL/token/curl and the condition's
decision and data format; pure, on virtual time (no engine)."""

from __future__ import annotations

import json

import pytest

from shared.errors import InvalidInput, PermanentError
from shared.plugins import ObservedState, Outcome
from shared.plugins.builtin.wait_condition import (
    ConditionProperties,
    HandleProperties,
    WaitCondition,
    WaitConditionHandle,
    WaitSignal,
    data_attribute,
    evaluate,
    normalise_signal,
)
from tests.unit.plugins.plugin_fakes import CtxFactory, VirtualClock

API = "http://converge.example:8004"
ENDPOINT = f"{API}/v1/proj1/stacks/demo/5f0c2d0e-stack/resources/thing/signal"


async def test_handle_points_at_convergess_signal_url_with_a_token(make_ctx: CtxFactory) -> None:
    result = await WaitConditionHandle().create(make_ctx(api_url=API + "/"), HandleProperties())
    attrs = result.attributes
    assert attrs["endpoint"] == ENDPOINT
    assert len(attrs["token"]) == 48
    assert attrs["curl_cli"] == (
        f"curl -i -X POST -H 'X-Auth-Token: {attrs['token']}' "
        "-H 'Content-Type: application/json' -H 'Accept: application/json' " + ENDPOINT
    )
    assert json.loads(attrs["signal"]) == {"endpoint": ENDPOINT, "token": attrs["token"]}


async def test_handle_token_is_stable_on_redelivery_and_new_per_action(make_ctx: CtxFactory) -> None:
    handle, props = WaitConditionHandle(), HandleProperties()
    a = await handle.create(make_ctx(api_url=API, idempotency_key="k1"), props)
    a_again = await handle.create(make_ctx(api_url=API, idempotency_key="k1"), props)
    b = await handle.create(make_ctx(api_url=API, idempotency_key="k2"), props)
    assert a.attributes["token"] == a_again.attributes["token"] != b.attributes["token"]


async def test_handle_without_api_url_is_a_clear_error(make_ctx: CtxFactory) -> None:
    with pytest.raises(PermanentError, match="api_url"):
        await WaitConditionHandle().create(make_ctx(), HandleProperties())


async def test_handle_signal_normalises_heat_format(make_ctx: CtxFactory) -> None:
    result = await WaitConditionHandle().signal(make_ctx(), "pid", HandleProperties(), {"data": "x"})
    assert result.attributes["signal_received"] == {
        "status": "SUCCESS",
        "reason": "Signal received",
        "data": "x",
        "id": None,
    }


def test_signal_defaults_follow_heat() -> None:
    signal = normalise_signal(None, number=3)
    assert signal == WaitSignal(status="SUCCESS", reason="Signal 3 received", data=None, id="3")


def test_signal_with_unknown_status_is_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="status"):
        normalise_signal({"status": "DONE"}, number=1)


def test_condition_data_maps_signal_id_to_data() -> None:
    signals = [
        normalise_signal({"data": "a"}, number=1),
        normalise_signal({"id": "web", "data": 2}, number=2),
    ]
    assert json.loads(data_attribute(signals)) == {"1": "a", "web": 2}


def test_condition_is_ready_when_count_success_signals_arrived() -> None:
    one = [normalise_signal({}, number=1)]
    two = [*one, normalise_signal({}, number=2)]
    assert evaluate(one, count=2, now=0, timeout_at=10).state is ObservedState.IN_PROGRESS
    ready = evaluate(two, count=2, now=0, timeout_at=10)
    assert ready.state is ObservedState.READY
    assert json.loads(ready.attributes["data"]) == {"1": None, "2": None}


def test_condition_fails_on_a_failure_signal_with_its_reason() -> None:
    signals = [normalise_signal({"status": "FAILURE", "reason": "disk full"}, number=1)]
    seen = evaluate(signals, count=1, now=0, timeout_at=10)
    assert seen.state is ObservedState.FAILED
    assert "disk full" in seen.reason


def test_condition_fails_when_the_timeout_passes_first() -> None:
    seen = evaluate([], count=1, now=10, timeout_at=10)
    assert seen.state is ObservedState.FAILED
    assert "timed out" in seen.reason


async def test_condition_create_waits_and_observe_fails_after_timeout(
    make_ctx: CtxFactory, clock: VirtualClock
) -> None:
    props = ConditionProperties(handle="h", timeout=60)
    result = await WaitCondition().create(make_ctx(), props)
    assert result.outcome is Outcome.IN_PROGRESS
    assert result.physical_id is not None
    assert (
        await WaitCondition().observe(make_ctx(), result.physical_id, props)
    ).state is ObservedState.IN_PROGRESS
    clock.advance(60)
    assert (
        await WaitCondition().observe(make_ctx(), result.physical_id, props)
    ).state is ObservedState.FAILED
