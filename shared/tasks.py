"""Background tasks that never die silently.

Every long-lived task (consumers, heartbeats, pollers, servers) is started
through `Supervisor.spawn`, which names it and logs a crash or an unexpected
exit; `on_crash` lets the service stop itself instead of limping on.
`Supervisor.stop` cancels tasks in reverse start order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import structlog

log = structlog.get_logger(__name__)


def log_task_failure(task: asyncio.Task[Any]) -> None:
    """Done-callback: log a task that ended with an exception."""
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.error("task_crashed", task=task.get_name(), error=repr(exc), exc_info=exc)


class Supervisor:
    def __init__(self, *, on_crash: Callable[[str, BaseException | None], None] | None = None) -> None:
        self._tasks: list[asyncio.Task[Any]] = []
        self._on_crash = on_crash
        self._stopping = False

    def spawn(self, name: str, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name)
        task.add_done_callback(self._watch)
        self._tasks.append(task)
        return task

    def _watch(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled() or self._stopping:
            return
        exc = task.exception()
        if exc is not None:
            log.error("task_crashed", task=task.get_name(), error=repr(exc), exc_info=exc)
        else:
            log.error("task_exited", task=task.get_name())
        if self._on_crash is not None:
            self._on_crash(task.get_name(), exc)

    async def stop(self) -> None:
        self._stopping = True
        for task in reversed(self._tasks):
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
            except Exception as exc:  # noqa: BLE001 - already reported by _watch
                log.debug("task_ended_with_error", task=task.get_name(), error=repr(exc))
        self._tasks.clear()
