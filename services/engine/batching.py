"""Engine messages handled in batches: one transaction and one publish for many.

Where it sits: `EngineService.handle` hands each node check and job result to
`Batches.submit` and waits. Messages that arrive together (the consumer runs
up to its prefetch of handlers at once) are taken by one of `concurrency`
runners, up to `size` at a time, and handled by one call of `run`
(`Convergence.handle_batch`: one transaction, one statement per stage where
the stages allow, one outbox write, one publish with one confirm wait). While a
batch is being handled the messages that arrive meanwhile wait and go in the
next one, so the busier the engine, the bigger its batches (group commit).
A runner left idle while another's batch is in flight does not take a message
that came alone at once: it waits, briefly, for a fuller batch (`fill`,
`linger`), since a batch's statements cost about the same for one message as
for forty.

A batch that fails changes nothing (its transaction rolled back); each of its
messages is then handled alone by its submitter (`submit` returns False), with
everything the single-message path does about conflicts, an unreachable
database or values the template pool must resolve. Each message is still
acknowledged by its own handler once its batch committed and published, so a
crash at any instant leaves messages unacknowledged to be delivered again, and
the inbox makes a second handling a no-op.

A batch runs in the context (`contextvars`) of its first message's handler,
as that handler would have: a test's crash injection that follows the
handler's steps then crashes inside a batch too.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import structlog
from prometheus_client import CollectorRegistry, Counter, Histogram

log = structlog.get_logger(__name__)

M = TypeVar("M")

#: Inside a batch's task: how many messages the batch holds (0 outside any batch).
BATCH_SIZE: contextvars.ContextVar[int] = contextvars.ContextVar("engine_batch_size", default=0)


@dataclass(frozen=True)
class BatchPolicy:
    """How the engine batches: at most `size` messages a batch, `concurrency` batches
    in flight at once, and up to `follow_on` of the node checks a batch triggers
    handled in its own transaction instead of sent (`convergence.follow_on`; 0: none).
    While one batch is in flight, an idle runner starts the next only once `fill`
    messages wait or `linger` seconds pass (`fill` 1 or `linger` 0: at once); if that
    batch ends first, its own runner takes what waits.
    `size` 1 turns batching off (and with it follow-on checks)."""

    size: int = 64
    concurrency: int = 2
    follow_on: int = 256
    fill: int = 16
    linger: float = 0.025

    def __post_init__(self) -> None:
        if self.size < 1 or self.concurrency < 1 or self.follow_on < 0 or self.fill < 1 or self.linger < 0:
            raise ValueError(
                f"bad batch policy {self}: size, concurrency and fill must be >= 1, follow_on and linger >= 0"
            )


DEFAULT_BATCH_POLICY = BatchPolicy()


@dataclass
class _Waiting(Generic[M]):
    message: M
    context: contextvars.Context
    done: asyncio.Future[bool]


class Batches(Generic[M]):
    """Gathers submitted messages into batches handled by `run` (see the module)."""

    def __init__(
        self,
        run: Callable[[Sequence[M]], Coroutine[Any, Any, None]],
        policy: BatchPolicy,
        *,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self._run = run
        self._policy = policy
        registry = registry if registry is not None else CollectorRegistry()
        self._sizes = Histogram(
            "converge_engine_batch_messages",
            "Messages per engine batch (node checks and job results handled in one transaction).",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
            registry=registry,
        )
        self._failed = Counter(
            "converge_engine_batches_failed",
            "Engine batches rolled back (their messages then handled one by one).",
            registry=registry,
        )
        self._waiting: list[_Waiting[M]] = []
        self._wake = asyncio.Event()
        self._runners = 0  # running `serve` loops
        self._busy = 0  # runners handling a batch

    @property
    def serving(self) -> bool:
        return self._runners > 0

    async def submit(self, message: M) -> bool:
        """Wait until `message` is handled in a committed batch (True) or its batch
        failed (False: nothing of it was committed; handle it alone)."""
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Waiting(message, contextvars.copy_context(), done))
        self._wake.set()
        return await done

    async def serve(self) -> None:
        """One runner: take the waiting messages, a batch at a time, until cancelled
        (what it holds then is cancelled too: those messages come again)."""
        self._runners += 1
        try:
            while True:
                if not self._waiting:
                    self._wake.clear()
                    await self._wake.wait()
                await asyncio.sleep(0)  # handlers delivered in this turn of the loop join the batch
                await self._fill()
                batch, self._waiting = (
                    self._waiting[: self._policy.size],
                    self._waiting[self._policy.size :],
                )
                if self._waiting:
                    self._wake.set()  # the rest is for another runner, or this one's next batch
                batch = [w for w in batch if not w.done.done()]  # not those whose handler is gone
                if batch:
                    self._busy += 1
                    try:
                        await self._handle(batch)
                    finally:
                        self._busy -= 1  # and this runner takes what waits, full or not
        finally:
            self._runners -= 1
            if not self._runners:
                for waiting in self._waiting:
                    waiting.done.cancel()
                self._waiting = []

    async def _fill(self) -> None:
        """While another runner's batch is in flight, wait until `fill` messages wait or
        `linger` seconds pass (if that batch ends first, its runner takes what waits, and
        this one finds less or nothing): a message that came alone goes in a fuller batch
        instead of paying a batch's statements for itself."""
        policy = self._policy
        if not self._busy or len(self._waiting) >= policy.fill:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(policy.linger):
                while self._busy and len(self._waiting) < policy.fill:
                    self._wake.clear()
                    await self._wake.wait()

    async def _handle(self, batch: list[_Waiting[M]]) -> None:
        messages = [w.message for w in batch]
        self._sizes.observe(len(messages))
        context = batch[0].context.copy()
        context.run(BATCH_SIZE.set, len(messages))
        task: asyncio.Task[None] = asyncio.create_task(self._run(messages), context=context)
        try:
            await task
        except asyncio.CancelledError:
            for waiting in batch:
                waiting.done.cancel()
            raise
        except Exception as exc:  # noqa: BLE001 - rolled back whatever it was: each message goes alone
            log.info("batch_failed", size=len(batch), error=f"{type(exc).__name__}: {exc}")
            self._failed.inc()
            outcome = False
        else:
            outcome = True
        for waiting in batch:
            if not waiting.done.done():
                waiting.done.set_result(outcome)
