"""Proves `shared.bus.dispatch.verdict_for`: a handler's error type decides what
happens to its message (pure; the buses act on the verdict, see
tests/integration/test_bus_semantics.py)."""

from __future__ import annotations

import pytest

from shared.bus.dispatch import MAX_RETRY_AFTER, Action, Verdict, verdict_for
from shared.errors import (
    Abandoned,
    BusError,
    ConflictError,
    InvalidInput,
    MessageRejected,
    NotFound,
    PermanentError,
    StoreUnavailable,
    TransientError,
)


@pytest.mark.parametrize(
    "error",
    [
        PermanentError("the template is missing"),
        InvalidInput("must be a string", path="resources.web.properties.image"),
        NotFound("no such stack"),
        MessageRejected("unknown kind"),
    ],
)
def test_a_permanent_error_dead_letters_on_the_first_delivery_with_its_reason(error: Exception) -> None:
    verdict = verdict_for(error, attempt=1, max_deliveries=5)
    assert verdict.action is Action.DEAD_LETTER
    assert f"{type(error).__name__}: {error}" in verdict.error
    assert "not retried" in verdict.error


def test_a_transient_error_is_requeued_after_its_retry_after() -> None:
    verdict = verdict_for(TransientError("429 from the cloud", retry_after=2.5), attempt=1, max_deliveries=5)
    assert verdict == Verdict(Action.REQUEUE, "TransientError: 429 from the cloud", delay=2.5)


def test_a_transient_error_without_retry_after_is_requeued_at_once() -> None:
    for error in (TransientError("timeout"), BusError("broker gone"), StoreUnavailable("database down")):
        verdict = verdict_for(error, attempt=2, max_deliveries=5)
        assert (verdict.action, verdict.delay) == (Action.REQUEUE, 0.0)


def test_a_retry_after_is_capped_and_never_negative() -> None:
    long = verdict_for(TransientError("slow down", retry_after=3600), attempt=1, max_deliveries=5)
    negative = verdict_for(TransientError("clock skew", retry_after=-3), attempt=1, max_deliveries=5)
    assert long.delay == MAX_RETRY_AFTER
    assert negative == Verdict(Action.REQUEUE, "TransientError: clock skew", delay=0.0)


def test_a_transient_error_still_counts_towards_dead_lettering() -> None:
    verdict = verdict_for(TransientError("429", retry_after=1), attempt=5, max_deliveries=5)
    assert verdict.action is Action.DEAD_LETTER
    assert verdict.error == "failed 5 deliveries; last error: TransientError: 429"


@pytest.mark.parametrize("error", [ValueError("boom"), ConflictError("resource changed; will retry")])
def test_other_errors_are_requeued_at_once_until_the_last_delivery(error: Exception) -> None:
    assert verdict_for(error, attempt=4, max_deliveries=5) == Verdict(
        Action.REQUEUE, f"{type(error).__name__}: {error}"
    )
    last = verdict_for(error, attempt=5, max_deliveries=5)
    assert last.action is Action.DEAD_LETTER
    assert last.error == f"failed 5 deliveries; last error: {type(error).__name__}: {error}"


def test_an_abandoned_message_is_requeued_whatever_its_deliveries() -> None:
    assert verdict_for(Abandoned("shutting down"), attempt=50, max_deliveries=5) == Verdict(
        Action.REQUEUE, "abandoned"
    )
