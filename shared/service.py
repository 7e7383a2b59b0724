"""Process lifecycle shared by every console script.

`run_service` installs SIGTERM/SIGINT handlers that set one stop event, runs
the service coroutine on the event loop the settings chose
(`CONVERGE_EVENT_LOOP`: uvloop where installed, unless told `asyncio`; see
`event_loop_factory`) until it returns (it drains and closes everything after
the event is set) and turns the outcome into an exit code: 0 after a clean
drain, 1 if the service failed. Settings are loaded (exit 2 on a bad value)
and logging configured before any of this, by the script's `main`.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Coroutine
from typing import Any

import structlog

from shared.errors import ConvergeError
from shared.settings import EventLoop

log = structlog.get_logger(__name__)

ServiceMain = Callable[[asyncio.Event], Coroutine[Any, Any, None]]


def event_loop_factory(choice: EventLoop) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The loop factory for `choice` (None: the standard library's loop). `auto` takes
    uvloop when it imports and quietly falls back otherwise; settings refuse `uvloop`
    where it is not installed, before this runs."""
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def install_stop_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, _on_signal, stop, sig)


def _on_signal(stop: asyncio.Event, sig: signal.Signals) -> None:
    if stop.is_set():
        log.warning("second_signal_ignored_while_draining", signal=sig.name)
        return
    log.info("stopping", signal=sig.name)
    stop.set()


def run_service(service: ServiceMain, *, name: str, event_loop: EventLoop = "auto") -> int:
    """Run `service` until a stop signal; return the process exit code."""
    structlog.contextvars.bind_contextvars(service=name)
    factory = event_loop_factory(event_loop)

    async def main() -> None:
        stop = asyncio.Event()
        install_stop_signals(stop)
        await service(stop)

    try:
        with asyncio.Runner(loop_factory=factory) as runner:
            log.debug("event_loop", loop=type(runner.get_loop()).__module__)
            runner.run(main())
    except ConvergeError as exc:
        log.error("service_failed", error=str(exc), error_type=type(exc).__name__)
        return 1
    log.info("stopped")
    return 0
