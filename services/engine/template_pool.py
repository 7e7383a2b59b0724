"""The template pool: where user-controlled template work runs, off the event loop.

Where it sits: an edge, injected into the API handlers, `Operations`,
`DefinitionCache` and nested `Children` as a `TemplateRunner`, which runs a
pure job (`goals.load_goal`, `validate_goal`, `load_definition`,
`load_child_goal`, the dashboard's `graph_layout.layout`) and returns its
result. `TemplatePool` (what `converge-engine` and `converge up` use) runs each job in one of a bounded
number of worker processes (pebble's `ProcessPool`, started by forkserver):

- a job that runs longer than `timeout_seconds` is stopped by killing its
  worker (a new one takes its place) and answered `TemplateTooSlow`;
- each worker's address space is capped (`RLIMIT_AS`, `memory_bytes`), so a
  job that gets past the evaluation budget fails with `MemoryError`
  (answered `TemplateTooBig`) instead of taking the machine down; a worker
  that dies all the same is answered `TemplateWorkerDied`;
- arguments and results cross the process boundary pickled, not on the
  loop: arguments in pebble's thread; a result is pickled by the worker itself
  and unpickled here in a thread with the cyclic garbage collector paused (a
  big stack is hundreds of thousands of objects: collecting while they are
  created was most of the cost, and held the loop's GIL for long stretches);
  errors keep their type and message.

All three answers are `InvalidInput` (400 at the API; a nested resource
fails with the message). A job waits in the queue while every worker is
busy, so a slow template delays only the requests queued behind it, and the
process's own event loop (health checks, other tenants' reads, convergence)
never runs template code. `InlineTemplates` runs jobs in the caller's thread:
for unit tests and tools (and the constant empty template of a delete).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import multiprocessing
import multiprocessing.forkserver
import os
import pickle
import resource
from collections.abc import Callable, Iterable
from typing import Any, ParamSpec, Protocol, TypeVar

import pebble
import structlog

from services.engine.collector import COLLECTOR
from shared.errors import InvalidInput

log = structlog.get_logger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

#: Imported once by the fork server, so each worker starts with them loaded.
_PRELOAD = ("services.engine.goals", "services.engine.graph_layout")
#: Set for the fork server's Python: no unsafe path (the current directory) first on its module path.
SAFE_PATH = "PYTHONSAFEPATH"


class TemplateRunner(Protocol):
    async def run(self, job: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T: ...


class InlineTemplates:
    """Runs each job at once in the caller's thread (no limits but the budget's)."""

    async def run(self, job: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        return job(*args, **kwargs)


INLINE = InlineTemplates()


class TemplateWorkRefused(InvalidInput):
    """The template pool stopped a job; the message names the limit and its setting."""


class TemplateTooSlow(TemplateWorkRefused):
    pass


class TemplateTooBig(TemplateWorkRefused):
    pass


class TemplateWorkerDied(TemplateWorkRefused):
    pass


def _start_fork_server() -> None:
    """Start this process's fork server (once; the workers fork from it) without the
    current directory on its module path. Python puts that first for `-c`, which is how
    the fork server starts, so a `services` or `shared` folder wherever the engine was
    started would be the code its workers import (another checkout's, or anyone's who
    can write there). `PYTHONSAFEPATH` tells the fork server's Python not to."""
    before = os.environ.get(SAFE_PATH)
    os.environ[SAFE_PATH] = "1"
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        if before is None:
            del os.environ[SAFE_PATH]
        else:
            os.environ[SAFE_PATH] = before


def _start_worker(memory_bytes: int) -> None:
    """In each new worker: cap its address space (0 = no cap)."""
    if memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))


def ping() -> int:
    """A job that does nothing (`start` runs one per worker to start them)."""
    return 0


def _packed(job: Callable[..., object], args: tuple[object, ...], kwargs: dict[str, object]) -> bytes:
    """In a worker: run `job` without the cyclic collector (the worker does nothing
    else meanwhile, and its memory is capped) and pickle the result."""
    gc.disable()
    try:
        return pickle.dumps(job(*args, **kwargs), protocol=pickle.HIGHEST_PROTOCOL)
    finally:
        gc.enable()


def _unpickled(data: bytes) -> Any:
    """A worker's result, unpickled with the collector paused (`collector`)."""
    with COLLECTOR.paused():
        return pickle.loads(data)


class TemplatePool:
    """`workers` processes, each job stopped after `timeout_seconds`, each worker
    capped at `memory_bytes` of address space."""

    def __init__(
        self, *, workers: int, timeout_seconds: float, memory_bytes: int, preload: Iterable[str] = ()
    ) -> None:
        """`preload`: more modules each worker should start with (the resource types')."""
        self.workers = workers
        self.timeout_seconds = timeout_seconds
        self.memory_bytes = memory_bytes
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([*_PRELOAD, *preload])
        _start_fork_server()
        self._pool = pebble.ProcessPool(
            max_workers=workers, initializer=_start_worker, initargs=(memory_bytes,), context=context
        )

    async def start(self) -> None:
        """Start the workers now rather than on the first request."""
        await asyncio.gather(*(self.run(ping) for _ in range(self.workers)))

    async def run(self, job: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        future: concurrent.futures.Future[bytes] = self._pool.schedule(
            _packed, args=(job, args, kwargs), timeout=self.timeout_seconds
        )
        try:
            data = await asyncio.wrap_future(future)
        except TimeoutError:
            log.warning("template_job_stopped", job=job.__name__, reason="timeout")
            raise TemplateTooSlow(
                f"evaluating the template took longer than {self.timeout_seconds:g} s, the most one "
                "request may take (raise it with CONVERGE_TEMPLATE_TIMEOUT_SECONDS); it was stopped"
            ) from None
        except MemoryError:
            log.warning("template_job_stopped", job=job.__name__, reason="memory")
            raise TemplateTooBig(_memory_message(self.memory_bytes)) from None
        except pebble.ProcessExpired as exc:
            log.warning("template_job_stopped", job=job.__name__, reason="worker died", exitcode=exc.exitcode)
            raise TemplateWorkerDied(
                f"the template worker evaluating this request stopped (exit code {exc.exitcode}); "
                + _memory_message(self.memory_bytes)
            ) from None
        result: T = await asyncio.to_thread(_unpickled, data)
        return result

    def close(self) -> None:
        """Stop the workers (jobs still running are abandoned)."""
        self._pool.stop()  # type: ignore[no-untyped-call]
        self._pool.join(timeout=10)


def _memory_message(memory_bytes: int) -> str:
    limit = f"{memory_bytes // 2**20} MiB" if memory_bytes else "the machine's memory"
    return (
        f"evaluating the template needed more memory than a template worker may use ({limit}; raise "
        "it with CONVERGE_TEMPLATE_WORKER_MEMORY_BYTES)"
    )
