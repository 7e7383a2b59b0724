"""Crash injection for the in-process harness: engines that die between two steps.

Where it sits: `tests/support/convergence.py`, in crash mode, runs two
consuming engines on one database and one in-process bus, each an
`EngineNode` with its own pool and its own "connection" to the bus, as
separate processes would have. Every database statement, transaction commit
and publish of an engine is a *step* (`StepPool`, `StepBus`). A seeded
`CrashPlan` picks engine messages whose handling kills its engine at one step:

- `Phase.TRANSACTION`: before the k-th statement of the handler's transaction,
  or before its commit: the transaction rolls back and the message returns
  to the queue (case b: cancelled in the middle of a handler);
- `Phase.AFTER_COMMIT`: before the k-th publish of the handler's outbox
  rows, or before the acknowledgement: the effects stay, the message is
  delivered again (the inbox makes that a no-op) and outbox rows nobody
  published are relayed by a live engine (case a). With k > 1 some messages
  went out and the relay publishes them again, maybe after what they did was
  undone (a create job replayed after its resource was deleted: the engine
  reaps what it creates; tests/integration/test_late_replays.py).

A crashed engine stops at once: none of its tasks takes another step; its
in-flight handlers are cancelled where they stand (their transactions roll
back), its consumers die without acknowledging (their messages return to
the queue), its background loops stop and its connections are dropped. A
fresh `EngineService` on the same database takes its place, as a restarted
process would. The wrappers are the pool and bus handed to `EngineService`,
the seams where it receives its dependencies.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import itertools
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import TracebackType
from typing import Any

import asyncpg
import structlog

from services.engine.batching import BATCH_SIZE
from services.engine.service import EngineService
from services.engine.store import connect
from services.engine.template import DEFAULT_CONSTRAINTS, CustomConstraints
from shared.bus import Delivery, Handler, Outgoing
from shared.bus.memory import MemoryBus, MemorySubscription
from shared.host import Consumption, start_consuming
from shared.messages import Codec, Message
from shared.plugins import ResourceType
from shared.settings import EngineSettings
from shared.tasks import Supervisor

log = structlog.get_logger(__name__)


class Phase(StrEnum):
    TRANSACTION = "in the transaction"
    AFTER_COMMIT = "after the commit"


@dataclass(frozen=True)
class Crash:
    """Kill the engine before the `step`-th step of `phase`, or at the phase's end
    (its commit or acknowledgement) if it has fewer steps or `step` is None."""

    phase: Phase
    step: int | None


class CrashPlan:
    """Which engine messages crash their engine, and where: drawn from the seed.

    The first crash comes within the first `first_within` engine messages (every
    scenario handles more), the next ones `gap` messages apart, at most `limit`.
    """

    def __init__(
        self, seed: int | str, *, first_within: int = 2, gap: tuple[int, int] = (3, 12), limit: int = 3
    ) -> None:
        self._rng = random.Random(f"crash-{seed}")
        self._gap = gap
        self._limit = limit
        self._next_at = self._rng.randint(1, first_within)
        self.handled = 0
        self.planned = 0
        self._running = 0  # handlers with a planned crash that have not reached it nor ended
        self._none_running = asyncio.Event()
        self._none_running.set()

    def started(self) -> None:
        """A handler with a planned crash starts."""
        self._running += 1
        self._none_running.clear()

    def reached(self) -> None:
        """A handler with a planned crash crashed its engine, or ended without (its
        engine died of another crash first)."""
        self._running -= 1
        if self._running == 0:
            self._none_running.set()

    async def all_reached(self) -> None:
        await self._none_running.wait()

    def next(self) -> Crash | None:
        """The crash for the next engine message handled, if it is to have one."""
        self.handled += 1
        if self.planned >= self._limit or self.handled < self._next_at:
            return None
        self.planned += 1
        self._next_at = self.handled + self._rng.randint(*self._gap)
        if self._rng.random() < 0.5:
            return Crash(Phase.TRANSACTION, self._rng.randint(1, 10))
        return Crash(Phase.AFTER_COMMIT, self._rng.choice([1, 2, 3, None]))


@dataclass
class _Run:
    """One handler run that is to crash its engine."""

    node: EngineNode
    crash: Crash
    steps: int = 0
    committed: bool = False
    fired: bool = False


_RUN: contextvars.ContextVar[_Run | None] = contextvars.ContextVar("crash_run", default=None)


async def _never() -> None:
    """Where a dead engine's tasks wait to be cancelled."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
    await asyncio.get_running_loop().create_future()


class EngineNode:
    """One engine "process": its service, pool, supervisor and consumers."""

    def __init__(self, name: str, pool: asyncpg.Pool, on_crash: Callable[[EngineNode, str], None]) -> None:
        self.name = name
        self.pool = pool
        self.supervisor = Supervisor()
        self.subs: list[MemorySubscription] = []
        self.dead = False
        self.armed = True  # may crash; off while the harness shuts down
        self._on_crash = on_crash
        self.service: EngineService | None = None

    async def step(self, what: str, *, ends: Phase | None = None, final: bool = False) -> None:
        """A step of this engine: `ends` marks the last step of a phase (the commit),
        `final` the end of the handler (its ack or nack), where a planned crash that
        has not happened yet happens."""
        if self.dead:
            await _never()
        run = _RUN.get()
        if run is None or run.node is not self or run.fired or not self.armed:
            return
        phase = Phase.AFTER_COMMIT if run.committed else Phase.TRANSACTION
        if not final:
            if phase is not run.crash.phase:
                return
            run.steps += 1
            if ends is not phase and (run.crash.step is None or run.steps < run.crash.step):
                return
        run.fired = True
        self._on_crash(self, f"{phase.value}, before {what} (step {run.steps + final})")
        await _never()

    def committed(self) -> None:
        run = _RUN.get()
        if run is not None and run.node is self:
            run.committed = True

    def crashing(self, handler: Handler, plan: CrashPlan) -> Handler:
        """`handler`, crashing this engine where the plan says."""

        async def handle(message: Message, delivery: Delivery) -> None:
            crash = plan.next() if self.armed else None
            if crash is None:
                await handler(message, delivery)
                return
            run = _Run(self, crash)
            token = _RUN.set(run)
            plan.started()
            try:
                await handler(message, delivery)
            except Exception:
                await self.step("the nack", final=True)
                raise
            else:
                await self.step("the ack", final=True)
            finally:
                _RUN.reset(token)
                if not run.fired:  # (a fired crash is counted by `_crash`)
                    plan.reached()

        return handle


class StepConnection:
    """A pooled connection whose statements and commit are steps of its engine."""

    def __init__(self, conn: Any, node: EngineNode) -> None:
        self._conn = conn
        self._node = node

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        await self._node.step("a statement")
        return await self._conn.execute(*args, **kwargs)

    async def executemany(self, *args: Any, **kwargs: Any) -> Any:
        await self._node.step("a statement")
        return await self._conn.executemany(*args, **kwargs)

    async def fetch(self, *args: Any, **kwargs: Any) -> Any:
        await self._node.step("a statement")
        return await self._conn.fetch(*args, **kwargs)

    async def fetchrow(self, *args: Any, **kwargs: Any) -> Any:
        await self._node.step("a statement")
        return await self._conn.fetchrow(*args, **kwargs)

    async def fetchval(self, *args: Any, **kwargs: Any) -> Any:
        await self._node.step("a statement")
        return await self._conn.fetchval(*args, **kwargs)

    def transaction(self, **kwargs: Any) -> StepTransaction:
        return StepTransaction(self._conn.transaction(**kwargs), self._node)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


class StepTransaction:
    """A transaction whose commit is the last step of the transaction phase."""

    def __init__(self, transaction: Any, node: EngineNode) -> None:
        self._tx = transaction
        self._node = node

    async def __aenter__(self) -> StepTransaction:
        await self._tx.__aenter__()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is None:
            try:
                await self._node.step("the commit", ends=Phase.TRANSACTION)
            except BaseException as crash:
                await self._tx.__aexit__(type(crash), crash, crash.__traceback__)
                raise
        await self._tx.__aexit__(kind, exc, tb)
        if kind is None:
            self._node.committed()


class _Acquired:
    def __init__(self, pool: asyncpg.Pool, node: EngineNode) -> None:
        self._cm = pool.acquire()
        self._node = node

    async def __aenter__(self) -> StepConnection:
        return StepConnection(await self._cm.__aenter__(), self._node)

    async def __aexit__(self, *exc: Any) -> None:
        await self._cm.__aexit__(*exc)


class StepPool:
    """The engine's pool: statements through it are steps of its engine."""

    def __init__(self, pool: asyncpg.Pool, node: EngineNode) -> None:
        self._pool = pool
        self._node = node

    def acquire(self) -> _Acquired:
        return _Acquired(self._pool, self._node)

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        await self._node.step("a statement")
        return await self._pool.execute(*args, **kwargs)

    async def fetch(self, *args: Any, **kwargs: Any) -> Any:
        await self._node.step("a statement")
        return await self._pool.fetch(*args, **kwargs)

    async def fetchrow(self, *args: Any, **kwargs: Any) -> Any:
        await self._node.step("a statement")
        return await self._pool.fetchrow(*args, **kwargs)

    async def fetchval(self, *args: Any, **kwargs: Any) -> Any:
        await self._node.step("a statement")
        return await self._pool.fetchval(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)


class StepBus:
    """The engine's connection to the in-process broker: publishes are steps, and
    its consumers die with it. Closing it leaves the broker running."""

    def __init__(self, bus: MemoryBus, node: EngineNode) -> None:
        self._bus = bus
        self._node = node

    async def publish(self, queue: str, message: Message) -> None:
        await self._node.step("a publish")
        await self._bus.publish(queue, message)

    async def publish_raw(self, queue: str, body: bytes) -> None:
        await self._node.step("a publish")
        await self._bus.publish_raw(queue, body)

    async def publish_many(self, queue: str, messages: Sequence[Message]) -> None:
        for message in messages:
            await self.publish(queue, message)

    async def publish_batch(self, outgoing: Sequence[Outgoing]) -> None:
        for out in outgoing:
            await self.publish(out.queue, out.message)

    async def publish_raw_batch(self, bodies: Sequence[tuple[str, bytes]]) -> None:
        for queue, body in bodies:
            await self.publish_raw(queue, body)

    async def depth(self, queue: str) -> int:
        return await self._bus.depth(queue)

    async def consume(
        self, queue: str, handler: Handler, *, prefetch: int, codec: Codec
    ) -> MemorySubscription:
        sub = await self._bus.consume(queue, handler, prefetch=prefetch, codec=codec)
        self._node.subs.append(sub)
        return sub

    async def dead_letters(self, queue: str, *, limit: int = 100) -> list[Any]:
        return await self._bus.dead_letters(queue, limit=limit)

    async def close(self) -> None:
        return None


class CrashingEngines:
    """`count` consuming engines on one database and bus, crashed as `plan` says
    and replaced by fresh ones. `crashes` says where each crash happened."""

    def __init__(
        self,
        *,
        database_url: str,
        bus: MemoryBus,
        types: Mapping[str, type[ResourceType]],
        plan: CrashPlan,
        settings: EngineSettings,
        constraints: CustomConstraints = DEFAULT_CONSTRAINTS,
        count: int = 2,
    ) -> None:
        """Each engine is built from `settings` as `converge-engine` builds its own."""
        self._database_url = database_url
        self._bus = bus
        self._types = types
        self._plan = plan
        self._count = count
        self._settings = settings
        self._constraints = constraints
        self._names = itertools.count(1)
        self._replacing: set[asyncio.Task[None]] = set()
        self.nodes: list[EngineNode] = []
        self.crashes: list[str] = []

    async def start(self) -> None:
        for _ in range(self._count):
            self.nodes.append(await self._start_node())

    async def _start_node(self) -> EngineNode:
        pool = await connect(self._database_url, size=4)
        node = EngineNode(f"engine-{next(self._names)}", pool, self._crash)
        bus = StepBus(self._bus, node)
        node.service = EngineService.from_settings(
            self._settings,
            pool=StepPool(pool, node),  # type: ignore[arg-type]
            bus=bus,
            types=self._types,
            constraints=self._constraints,
            supervisor=node.supervisor,
        )
        await node.service.start()
        consumptions: list[Consumption] = [
            dataclasses.replace(c, handler=node.crashing(c.handler, self._plan))
            for c in node.service.consumptions()
        ]
        await start_consuming(bus, consumptions)
        return node

    def _crash(self, node: EngineNode, where: str) -> None:
        """Called from a step of `node`: it is dead from now on; replace it."""
        if node.dead:
            return
        node.dead = True
        self._plan.reached()
        batch = BATCH_SIZE.get()
        if batch:
            where += f", in a batch of {batch}"
        self.crashes.append(f"{node.name} {where}")
        log.info("engine_crash_injected", engine=node.name, where=where)
        # A fresh context: the replacement is no part of the crashing handler's run.
        task = asyncio.create_task(self._replace(node), name="replace-engine", context=contextvars.Context())
        self._replacing.add(task)
        task.add_done_callback(self._replacing.discard)

    async def _replace(self, node: EngineNode) -> None:
        for sub in node.subs:
            await sub.kill()
        await node.supervisor.stop()
        node.pool.terminate()
        replacement = await self._start_node()
        self.nodes[self.nodes.index(node)] = replacement

    async def planned_crashes_reached(self, timeout: float = 60.0) -> None:
        """Wait until every handler with a planned crash has reached it (or ended): a
        scenario may finish while such a handler still runs (a conflict's backoff, say),
        and its crash then happens after the scenario's end."""
        async with asyncio.timeout(timeout):
            await self._plan.all_reached()

    async def settle_crashes(self) -> None:
        """No more crashes; wait until every crashed engine has been replaced."""
        for node in self.nodes:
            node.armed = False
        while self._replacing:
            await asyncio.gather(*self._replacing)
        for node in self.nodes:
            node.armed = False

    async def stop_consuming(self) -> None:
        for node in self.nodes:
            for sub in node.subs:
                await sub.stop()

    async def stop(self) -> None:
        for node in self.nodes:
            await node.supervisor.stop()
            assert node.service is not None
            await node.service.stop()
            await node.pool.close()
