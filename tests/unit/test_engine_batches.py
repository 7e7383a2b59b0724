"""The engine's batching (services/engine/batching.py): what goes in one batch, and what a
failed or cancelled batch tells its messages' handlers. No services: `run` is a plain
coroutine that records what it was given."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator, Sequence

import pytest
import pytest_asyncio

from services.engine.batching import Batches, BatchPolicy

WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


class Recorder:
    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.contexts: list[str] = []
        self.fail_with: Exception | None = None
        self.gate: asyncio.Event | None = None  # when set, batches wait for it
        self.started = asyncio.Event()  # a batch started

    async def run(self, messages: Sequence[str]) -> None:
        self.batches.append(list(messages))
        self.contexts.append(WHO.get())
        self.started.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_with is not None:
            raise self.fail_with


Serving = tuple[Batches[str], Recorder, list[asyncio.Task[None]]]


@pytest_asyncio.fixture
async def serving() -> AsyncIterator[Serving]:
    recorder = Recorder()
    batches: Batches[str] = Batches(recorder.run, BatchPolicy(size=3, concurrency=1))
    runners = [asyncio.create_task(batches.serve())]
    await asyncio.sleep(0)
    yield batches, recorder, runners
    for runner in runners:
        runner.cancel()
    await asyncio.gather(*runners, return_exceptions=True)


async def submit_as(batches: Batches[str], who: str, message: str) -> bool:
    WHO.set(who)
    return await batches.submit(message)


async def test_messages_submitted_together_go_in_one_batch_up_to_its_size(serving: Serving) -> None:
    batches, recorder, _ = serving
    outcomes = await asyncio.gather(*(batches.submit(f"m{i}") for i in range(7)))
    assert outcomes == [True] * 7
    assert recorder.batches == [["m0", "m1", "m2"], ["m3", "m4", "m5"], ["m6"]]


async def test_messages_arriving_while_a_batch_runs_go_together_in_the_next(serving: Serving) -> None:
    batches, recorder, _ = serving
    recorder.gate = asyncio.Event()
    first = asyncio.create_task(batches.submit("first"))
    await recorder.started.wait()
    later = [asyncio.create_task(batches.submit(m)) for m in ("a", "b")]
    recorder.gate.set()  # one runner: what came meanwhile can only go in the next batch
    assert await asyncio.gather(first, *later) == [True, True, True]
    assert recorder.batches == [["first"], ["a", "b"]]


async def test_a_failed_batch_tells_every_handler_to_handle_its_message_alone(serving: Serving) -> None:
    batches, recorder, _ = serving
    recorder.fail_with = RuntimeError("conflict")
    assert list(await asyncio.gather(batches.submit("a"), batches.submit("b"))) == [False, False]


async def test_a_batch_runs_in_the_context_of_its_first_handler(serving: Serving) -> None:
    batches, recorder, _ = serving
    await asyncio.gather(
        asyncio.create_task(submit_as(batches, "first", "a")),
        asyncio.create_task(submit_as(batches, "second", "b")),
    )
    assert recorder.batches == [["a", "b"]]
    assert recorder.contexts == ["first"]


async def test_stopping_the_runner_cancels_the_handlers_waiting_on_it(serving: Serving) -> None:
    batches, recorder, runners = serving
    recorder.gate = asyncio.Event()  # never set: the batch hangs, as a dead engine's would
    running = asyncio.create_task(batches.submit("running"))
    await recorder.started.wait()
    waiting = asyncio.create_task(batches.submit("waiting"))
    await asyncio.sleep(0)
    runners[0].cancel()
    for handler in (running, waiting):
        with pytest.raises(asyncio.CancelledError):
            await handler
    assert not batches.serving


async def test_a_handler_gone_before_its_batch_starts_is_left_out(serving: Serving) -> None:
    batches, recorder, _ = serving
    recorder.gate = asyncio.Event()
    first = asyncio.create_task(batches.submit("first"))
    await recorder.started.wait()
    gone = asyncio.create_task(batches.submit("gone"))
    kept = asyncio.create_task(batches.submit("kept"))
    await asyncio.sleep(0)
    gone.cancel()
    recorder.gate.set()
    assert list(await asyncio.gather(first, kept)) == [True, True]
    assert recorder.batches == [["first"], ["kept"]]


def test_a_batch_policy_needs_room_for_one_message() -> None:
    with pytest.raises(ValueError, match="size and concurrency"):
        BatchPolicy(size=0)
