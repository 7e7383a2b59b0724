"""The observer's handlers: finish asynchronous actions and look for drift (see `completion`).

Each `ObserveRequest` is watched by the one observer that took it; the
message stays unacknowledged while it watches, so if this observer dies the
broker hands the request to another. The outcome is the handler's reply: the
bus publishes it to the engine (batched with other handlers' replies) before
the request is acknowledged. When the observer drains, its watches
are abandoned at once (requeued, not failed): another observer resumes them.
An `ObserveResource` (a round of a stack under observation, or an update with
`converge: true` whose check waits for it) is looked at once and what was
seen is reported to the engine, which judges drift; a waiting check's look is
answered even when the resource cannot be observed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge

from services.observer.completion import DEFAULT_POLL, PollPolicy, look, watch
from shared.bus import Bus, Delivery, Outgoing
from shared.errors import Abandoned
from shared.host import Consumption
from shared.logging import log_context
from shared.messages import Codec, Message
from shared.notifications import (
    NOTIFICATION_CODEC,
    NotificationEvent,
    ProviderNotification,
    notification_queue,
)
from shared.plugins.runtime import PluginRuntime
from shared.protocol import (
    ENGINE_QUEUE,
    OBSERVE_QUEUE,
    JobResult,
    ObserveRequest,
    ObserveResource,
    ResourceChanged,
    ResourceJob,
    ResourceObserved,
)

CODEC = Codec([ObserveRequest, ObserveResource])


class ObserverMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.settled = Counter(
            "converge_observer_settled", "Observations finished, by outcome.", ["outcome"], registry=registry
        )
        self.watching = Gauge("converge_observer_watching", "Resources being watched now.", registry=registry)
        self.notifications = Counter(
            "converge_observer_notifications",
            "Provider notifications handled: woke a watch here, or forwarded to the engine.",
            ["provider", "result"],
            registry=registry,
        )
        self.looked = Counter(
            "converge_observer_looked",
            "Resources of observed stacks looked at, by result.",
            ["result"],
            registry=registry,
        )


@dataclass
class Watch:
    """A watch this observer runs; a provider notification about its resource wakes it."""

    job: ResourceJob
    since: float
    wake: asyncio.Event

    async def pause(self, seconds: float) -> None:
        """Sleep between polls, cut short by a notification."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.wake.wait(), seconds)
        self.wake.clear()


class ObserverService:
    def __init__(
        self,
        *,
        bus: Bus,
        runtime: PluginRuntime,
        concurrency: int,
        metrics: ObserverMetrics,
        policy: PollPolicy = DEFAULT_POLL,
        providers: Sequence[str] = (),
    ) -> None:
        self._bus = bus
        self._runtime = runtime
        self._concurrency = concurrency
        self._metrics = metrics
        self._policy = policy
        self._providers = tuple(providers)
        self._stopping = asyncio.Event()
        self._watches: dict[str, Watch] = {}  # by job id

    def consumptions(self) -> list[Consumption]:
        observe = Consumption(
            OBSERVE_QUEUE, self.handle, prefetch=self._concurrency, codec=CODEC, abandon=self._stopping.set
        )
        notifications = [
            Consumption(notification_queue(p), self.notified, prefetch=64, codec=NOTIFICATION_CODEC)
            for p in self._providers
        ]
        return [observe, *notifications]

    def admin_routes(self) -> list[web.RouteDef]:
        async def observing(_: web.Request) -> web.Response:
            return web.json_response({"watching": self.watching()})

        return [web.get("/admin/observing", observing)]

    def watching(self) -> list[dict[str, Any]]:
        """What this observer is watching now (for its admin endpoint)."""
        return [
            {
                "job_id": job_id,
                "stack_id": w.job.stack_id,
                "resource_name": w.job.resource_name,
                "resource_type": w.job.resource_type,
                "physical_id": w.job.physical_id,
                "action": w.job.action.value,
                "since": w.since,
            }
            for job_id, w in sorted(self._watches.items(), key=lambda item: item[1].since)
        ]

    async def notified(self, message: Message, delivery: Delivery) -> Sequence[Outgoing]:
        """A provider says one of its resources changed: wake a watch of it here at once,
        and tell the engine, which looks at it now if its stack is under observation."""
        assert isinstance(message, ProviderNotification)
        woken = [w for w in self._watches.values() if w.job.physical_id == message.physical_id]
        for w in woken:
            w.wake.set()
        self._metrics.notifications.labels(message.provider, "woke" if woken else "forwarded").inc()
        structlog.get_logger("converge.observer").debug(
            "notification",
            notification_id=message.id,
            provider=message.provider,
            physical_id=message.physical_id,
            change=message.event.value,
            woke=len(woken),
        )
        if message.event is not NotificationEvent.CREATED:
            changed = ResourceChanged(
                id=f"{message.id}:changed", provider=message.provider, physical_id=message.physical_id
            )
            return [Outgoing(ENGINE_QUEUE, changed)]
        return []

    async def _watch_unless_stopping(self, message: ObserveRequest, log: Any) -> JobResult:
        """Watching is resumable: when this observer stops, another one takes over."""
        if self._stopping.is_set():
            raise Abandoned("observer is stopping")
        tracked = Watch(message.job, time.time(), asyncio.Event())
        runtime = dataclasses.replace(self._runtime, sleep=tracked.pause)
        watching = asyncio.create_task(watch(message, runtime=runtime, log=log, policy=self._policy))
        stopping = asyncio.create_task(self._stopping.wait())
        self._watches[message.job.job_id] = tracked
        try:
            await asyncio.wait({watching, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._watches.pop(message.job.job_id, None)
            stopping.cancel()
            if not watching.done():
                watching.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watching
        if watching.cancelled():
            raise Abandoned("observer is stopping")
        return watching.result()

    async def handle(self, message: Message, delivery: Delivery) -> Sequence[Outgoing]:
        """Watch a job's resource until it settles, or look at one resource once; the
        outcome is the reply (published by the bus in a batch, then the request acked)."""
        if isinstance(message, ObserveResource):
            return await self._look(message)
        assert isinstance(message, ObserveRequest)
        job = message.job
        with log_context(
            stack_id=job.stack_id,
            traversal_id=job.traversal_id,
            resource=job.resource_name,
            job_id=job.job_id,
        ):
            log = structlog.get_logger("converge.observer")
            log.debug(
                "watching", physical_id=job.physical_id, action=job.action.value, attempt=delivery.attempt
            )
            self._metrics.watching.inc()
            try:
                result = await self._watch_unless_stopping(message, log)
            finally:
                self._metrics.watching.dec()
            self._metrics.settled.labels(result.outcome.value).inc()
            log.debug("settled", outcome=result.outcome.value, reason=result.reason or None)
            return [Outgoing(job.reply_to, result)]

    async def _look(self, message: ObserveResource) -> list[Outgoing]:
        job = message.job
        with log_context(stack_id=job.stack_id, resource=job.resource_name, cycle=message.cycle):
            log = structlog.get_logger("converge.observer")
            seen = await look(message, runtime=self._runtime, log=log)
            self._metrics.looked.labels("reported" if seen is not None else "unobservable").inc()
            if seen is None and message.gate_node is not None and message.job.physical_id is not None:
                seen = ResourceObserved.unobserved(message)  # a check waits for an answer
            return [] if seen is None else [Outgoing(job.reply_to, seen)]
