"""Which event loop a service process runs on (`CONVERGE_EVENT_LOOP`).

Real: `run_service` running a coroutine that reports its own loop, and the
settings class read from the environment.
"""

from __future__ import annotations

import asyncio
import importlib.util

import pytest
import uvloop

from shared import settings as settings_module
from shared.service import event_loop_factory, run_service
from shared.settings import WorkerSettings


def _loop_of_a_service(choice: settings_module.EventLoop) -> type[asyncio.AbstractEventLoop]:
    seen: list[type[asyncio.AbstractEventLoop]] = []

    async def service(_stop: asyncio.Event) -> None:
        seen.append(type(asyncio.get_running_loop()))

    assert run_service(service, name="test", event_loop=choice) == 0
    return seen[0]


def test_services_run_on_uvloop_by_default_and_on_the_standard_loop_when_told() -> None:
    assert _loop_of_a_service("auto") is uvloop.Loop
    assert _loop_of_a_service("uvloop") is uvloop.Loop
    assert not issubclass(_loop_of_a_service("asyncio"), uvloop.Loop)


def test_auto_falls_back_to_the_standard_loop_without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "uvloop", None)  # import uvloop -> ImportError
    assert event_loop_factory("auto") is None
    with pytest.raises(ImportError):
        event_loop_factory("uvloop")


def test_settings_refuse_uvloop_where_it_is_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVERGE_EVENT_LOOP", "uvloop")
    assert WorkerSettings().event_loop == "uvloop"
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "uvloop" else real(name))
    with pytest.raises(ValueError, match="uvloop is not installed"):
        WorkerSettings()
    monkeypatch.setenv("CONVERGE_EVENT_LOOP", "asyncio")
    assert WorkerSettings().event_loop == "asyncio"
