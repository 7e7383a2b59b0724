"""Process lifecycle shared by every console script.

`run_service` installs SIGTERM/SIGINT handlers that set one stop event, runs
the service coroutine until it returns (it drains and closes everything after
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

log = structlog.get_logger(__name__)

ServiceMain = Callable[[asyncio.Event], Coroutine[Any, Any, None]]


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


def run_service(service: ServiceMain, *, name: str) -> int:
    """Run `service` until a stop signal; return the process exit code."""
    structlog.contextvars.bind_contextvars(service=name)

    async def main() -> None:
        stop = asyncio.Event()
        install_stop_signals(stop)
        await service(stop)

    try:
        asyncio.run(main())
    except ConvergeError as exc:
        log.error("service_failed", error=str(exc), error_type=type(exc).__name__)
        return 1
    log.info("stopped")
    return 0
