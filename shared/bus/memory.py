"""In-process bus (asyncio) with the same semantics as RabbitMQ.

Used by `converge up` (every service in one process) and by deterministic
protocol tests. Optional `Chaos` reorders, delays and duplicates deliveries
from a seed, so one scenario can be replayed under many delivery orders; it
can also send a message again as a new one (another message id, which the
engine's inbox does not recognise), as recovery does.
`MemorySubscription.kill()` drops a consumer abruptly (its unacknowledged
messages return to the queue, and its handlers still unwinding can no longer
acknowledge anything), standing in for a crashed process.

The queues live in the process's memory and end with it: nothing here is
durable. `converge up` relies on the engine's start-up recovery instead
(services/engine/recovery.py), which sends again, from the database, all
work that was in flight when the process stopped or died.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from shared.bus.base import DeadLetter, Delivery, Handler, Outgoing
from shared.bus.dispatch import Action, dispatch, hold, with_replies_published
from shared.messages import Codec, Message
from shared.settings import MAX_DELIVERIES
from shared.tasks import log_task_failure


@dataclass(frozen=True)
class Chaos:
    """Seeded delivery disorder: swap order, delay, duplicate; `resend_rate`: the chance
    that a message is also sent again under a new message id."""

    seed: int
    reorder: bool = True
    duplicate_rate: float = 0.0
    max_delay: float = 0.0  # seconds
    resend_rate: float = 0.0


@dataclass
class _Envelope:
    body: bytes
    deliveries: int = 0  # how many times it was handed out before


@dataclass
class _Queue:
    ready: deque[_Envelope] = field(default_factory=deque)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    dead: list[DeadLetter] = field(default_factory=list)


class MemoryBus:
    def __init__(self, *, max_deliveries: int = MAX_DELIVERIES, chaos: Chaos | None = None) -> None:
        self._max_deliveries = max_deliveries
        self._chaos = chaos
        self._rng = random.Random(chaos.seed if chaos else 0)
        self._queues: dict[str, _Queue] = {}
        self._pending_delays: set[asyncio.Task[None]] = set()

    def _queue(self, name: str) -> _Queue:
        if name not in self._queues:
            self._queues[name] = _Queue()
        return self._queues[name]

    async def depth(self, queue: str) -> int:
        return len(self._queue(queue).ready)

    async def publish_raw(self, queue: str, body: bytes) -> None:
        await self._enqueue(queue, _Envelope(body))

    async def publish_raw_batch(self, bodies: Sequence[tuple[str, bytes]]) -> None:
        for queue, body in bodies:
            await self.publish_raw(queue, body)

    async def publish(self, queue: str, message: Message) -> None:
        await self._enqueue(queue, _Envelope(message.encode()))

    async def publish_many(self, queue: str, messages: Sequence[Message]) -> None:
        for message in messages:
            await self.publish(queue, message)

    async def publish_batch(self, outgoing: Sequence[Outgoing]) -> None:
        for out in outgoing:
            await self.publish(out.queue, out.message)

    async def _enqueue(self, name: str, envelope: _Envelope, *, front: bool = False) -> None:
        bodies = [envelope.body]
        if self._chaos and self._rng.random() < self._chaos.duplicate_rate:
            bodies.append(envelope.body)
        if self._chaos and self._chaos.resend_rate and self._rng.random() < self._chaos.resend_rate:
            bodies.append(self._resent(envelope.body))
        for body in bodies:
            delay = self._rng.uniform(0, self._chaos.max_delay) if self._chaos else 0.0
            item = _Envelope(body, envelope.deliveries)
            if delay > 0:
                task = asyncio.create_task(self._later(name, item, delay))
                self._pending_delays.add(task)
                task.add_done_callback(self._pending_delays.discard)
            else:
                await self._put(name, item, front=front)

    def _resent(self, body: bytes) -> bytes:
        """The same message under a new id (a body that is not a message stays as it is)."""
        try:
            message = json.loads(body)
        except ValueError:
            return body
        if not isinstance(message, dict) or "id" not in message:
            return body
        message["id"] = uuid.UUID(int=self._rng.getrandbits(128)).hex
        return json.dumps(message, separators=(",", ":")).encode()

    async def _later(self, name: str, item: _Envelope, delay: float) -> None:
        await asyncio.sleep(delay)
        await self._put(name, item)

    async def _put(self, name: str, item: _Envelope, *, front: bool = False) -> None:
        q = self._queue(name)
        async with q.changed:
            if self._chaos and self._chaos.reorder and q.ready:
                q.ready.insert(self._rng.randint(0, len(q.ready)), item)
            elif front:
                q.ready.appendleft(item)
            else:
                q.ready.append(item)
            q.changed.notify_all()

    async def consume(
        self, queue: str, handler: Handler, *, prefetch: int, codec: Codec
    ) -> MemorySubscription:
        sub = MemorySubscription(self, queue, handler, prefetch, codec)
        sub.start()
        return sub

    async def _settle(self, queue: str, envelope: _Envelope, action: Action, error: str) -> None:
        if action is Action.REQUEUE:
            await self._put(queue, envelope)
        elif action is Action.DEAD_LETTER:
            self._queue(queue).dead.append(DeadLetter(queue, envelope.body, error))

    async def dead_letters(self, queue: str, *, limit: int = 100) -> list[DeadLetter]:
        dead = self._queue(queue).dead
        taken, dead[:] = dead[:limit], dead[limit:]
        return taken

    async def close(self) -> None:
        for task in list(self._pending_delays):
            task.cancel()
        await asyncio.gather(*self._pending_delays, return_exceptions=True)


class MemorySubscription:
    def __init__(self, bus: MemoryBus, queue: str, handler: Handler, prefetch: int, codec: Codec) -> None:
        self._bus, self._name, self._handler, self._codec = bus, queue, handler, codec
        self._slots = asyncio.Semaphore(prefetch)
        self._inflight: dict[asyncio.Task[None], _Envelope] = {}
        self._loop_task: asyncio.Task[None] | None = None
        self._killed = False
        self._stopping = asyncio.Event()  # cuts short the pauses of delayed requeues

    def start(self) -> None:
        self._loop_task = asyncio.create_task(self._run(), name=f"consume:{self._name}")
        self._loop_task.add_done_callback(log_task_failure)

    async def _run(self) -> None:
        q = self._bus._queue(self._name)
        while True:
            await self._slots.acquire()
            async with q.changed:
                await q.changed.wait_for(lambda: bool(q.ready))
                envelope = q.ready.popleft()
            envelope.deliveries += 1
            task = asyncio.create_task(self._handle(envelope), name=f"handle:{self._name}")
            self._inflight[task] = envelope
            task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._inflight.pop(task, None)
        self._slots.release()

    async def _handle(self, envelope: _Envelope) -> None:
        delivery = Delivery(self._name, envelope.deliveries, envelope.deliveries > 1)
        verdict = await dispatch(
            envelope.body,
            delivery,
            codec=self._codec,
            handler=self._handler,
            max_deliveries=self._bus._max_deliveries,
        )
        if verdict.action is Action.REQUEUE and verdict.delay > 0:
            await hold(verdict.delay, until=self._stopping)
        if self._killed:  # a dead consumer's connection is gone: kill() returned the message
            return
        verdict = await with_replies_published(
            verdict, delivery, publish=self._bus.publish_batch, max_deliveries=self._bus._max_deliveries
        )
        await self._bus._settle(self._name, envelope, verdict.action, verdict.error)

    async def _stop_taking(self) -> None:
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task

    async def stop(self) -> None:
        """Drain: take nothing new, let in-flight handlers finish (and ack); a message
        held for a delayed redelivery goes back at once."""
        await self._stop_taking()
        self._stopping.set()
        if self._inflight:
            await asyncio.wait(list(self._inflight))

    async def kill(self) -> None:
        """Crash: abandon in-flight handlers; their messages return unacked."""
        self._killed = True
        await self._stop_taking()
        abandoned = list(self._inflight.items())
        for task, _ in abandoned:
            task.cancel()
        await asyncio.gather(*(task for task, _ in abandoned), return_exceptions=True)
        for _, envelope in abandoned:
            await self._bus._put(self._name, envelope, front=True)
