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
    for bad in ({"size": 0}, {"concurrency": 0}, {"fill": 0}, {"linger": -1.0}):
        with pytest.raises(ValueError, match="size, concurrency and fill must be >= 1"):
            BatchPolicy(**bad)


class Gated:
    """Two runners whose batches each wait for their own gate (in the order they start)."""

    def __init__(self, policy: BatchPolicy) -> None:
        self.batches: list[list[str]] = []
        self.gates: list[asyncio.Event] = []
        self.changed = asyncio.Condition()
        self.queue: Batches[str] = Batches(self.run, policy)

    async def run(self, messages: Sequence[str]) -> None:
        gate = asyncio.Event()
        async with self.changed:
            self.batches.append(list(messages))
            self.gates.append(gate)
            self.changed.notify_all()
        await gate.wait()

    async def started(self, count: int) -> None:
        async with asyncio.timeout(60), self.changed:
            await self.changed.wait_for(lambda: len(self.batches) >= count)

    async def lone_behind_one_in_flight(self) -> tuple[asyncio.Task[bool], asyncio.Task[bool]]:
        """A batch of "first" in flight (its gate not set), then "a" submitted alone."""
        first = asyncio.create_task(self.queue.submit("first"))
        await self.started(1)
        return first, asyncio.create_task(self.queue.submit("a"))


@pytest_asyncio.fixture
async def two_runners(request: pytest.FixtureRequest) -> AsyncIterator[Gated]:
    gated = Gated(request.param)
    runners = [asyncio.create_task(gated.queue.serve()) for _ in range(2)]
    yield gated
    for gate in gated.gates:
        gate.set()
    for runner in runners:
        runner.cancel()
    await asyncio.gather(*runners, return_exceptions=True)


WAITS_LONG = BatchPolicy(size=8, concurrency=2, fill=3, linger=600)


@pytest.mark.parametrize("two_runners", [WAITS_LONG], indirect=True)
async def test_while_a_batch_is_in_flight_a_lone_message_waits_for_a_fuller_batch(two_runners: Gated) -> None:
    gated = two_runners
    first, lone = await gated.lone_behind_one_in_flight()
    for _ in range(5):  # turns of the loop enough for the idle runner to have taken it
        await asyncio.sleep(0)
    assert gated.batches == [["first"]]
    more = [asyncio.create_task(gated.queue.submit(m)) for m in ("b", "c")]
    await gated.started(2)  # `fill` (3) waiting: the idle runner goes, the first still in flight
    assert gated.batches == [["first"], ["a", "b", "c"]]
    for gate in gated.gates:
        gate.set()
    assert await asyncio.gather(first, lone, *more) == [True] * 4


@pytest.mark.parametrize("two_runners", [WAITS_LONG], indirect=True)
async def test_the_batch_in_flight_ending_sends_what_waits_without_the_fill(two_runners: Gated) -> None:
    gated = two_runners
    first, lone = await gated.lone_behind_one_in_flight()
    await asyncio.sleep(0)
    gated.gates[0].set()
    await gated.started(2)
    gated.gates[1].set()
    assert list(await asyncio.gather(first, lone)) == [True, True]
    assert gated.batches == [["first"], ["a"]]


WAITS_BRIEFLY = BatchPolicy(size=8, concurrency=2, fill=3, linger=0.01)


@pytest.mark.parametrize("two_runners", [WAITS_BRIEFLY], indirect=True)
async def test_a_lone_message_goes_after_the_linger_while_the_batch_in_flight_hangs(
    two_runners: Gated,
) -> None:
    gated = two_runners
    hanging, lone = await gated.lone_behind_one_in_flight()  # its gate is never set here
    await gated.started(2)
    gated.gates[1].set()
    assert await lone is True
    assert gated.batches == [["first"], ["a"]]
    assert not hanging.done()


@pytest.mark.parametrize("two_runners", [WAITS_LONG], indirect=True)
async def test_with_no_batch_in_flight_a_lone_message_goes_at_once(two_runners: Gated) -> None:
    gated = two_runners
    lone = asyncio.create_task(gated.queue.submit("a"))
    await gated.started(1)  # `linger` is ten minutes: only not waiting gets here
    gated.gates[0].set()
    assert await lone is True
