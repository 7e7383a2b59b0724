"""The cyclic collector paused around allocation-heavy steps (services/engine/collector.py)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from services.engine.collector import CollectorPause


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_collector_is_off_while_any_holder_pauses_it_and_on_after_the_last(collector_on: None) -> None:
    pause = CollectorPause()
    with pause.paused():
        assert not gc.isenabled()
        with pause.paused():
            assert not gc.isenabled()
        assert not gc.isenabled(), "the outer holder still pauses it"
    assert gc.isenabled()


def test_a_pause_held_in_another_thread_keeps_it_off(collector_on: None) -> None:
    pause = CollectorPause()
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with pause.paused():
            holding.set()
            release.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    assert holding.wait(30)
    with pause.paused():
        pass
    assert not gc.isenabled(), "the thread's pause outlives this one"
    release.set()
    thread.join(30)
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off(collector_on: None) -> None:
    pause = CollectorPause()
    gc.disable()
    with pause.paused():
        pass
    assert not gc.isenabled()
