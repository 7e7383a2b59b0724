"""The observer's handlers: finish asynchronous actions (see `completion`).

Each `ObserveRequest` is watched by the one observer that took it; the
message stays unacknowledged while it watches, so if this observer dies the
broker hands the request to another. The outcome is published to the engine
before the request is acknowledged. When the observer drains, its watches
are abandoned at once (requeued, not failed): another observer resumes them.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge

from services.observer.completion import DEFAULT_POLL, PollPolicy, watch
from shared.bus import Bus, Delivery
from shared.errors import Abandoned
from shared.host import Consumption
from shared.messages import Codec, Message
from shared.plugins.runtime import PluginRuntime
from shared.protocol import OBSERVE_QUEUE, JobResult, ObserveRequest

CODEC = Codec([ObserveRequest])


class ObserverMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.settled = Counter(
            "converge_observer_settled", "Observations finished, by outcome.", ["outcome"], registry=registry
        )
        self.watching = Gauge("converge_observer_watching", "Resources being watched now.", registry=registry)


class ObserverService:
    def __init__(
        self,
        *,
        bus: Bus,
        runtime: PluginRuntime,
        concurrency: int,
        metrics: ObserverMetrics,
        policy: PollPolicy = DEFAULT_POLL,
    ) -> None:
        self._bus = bus
        self._runtime = runtime
        self._concurrency = concurrency
        self._metrics = metrics
        self._policy = policy
        self._stopping = asyncio.Event()

    def consumptions(self) -> list[Consumption]:
        return [
            Consumption(
                OBSERVE_QUEUE,
                self.handle,
                prefetch=self._concurrency,
                codec=CODEC,
                abandon=self._stopping.set,
            )
        ]

    async def _watch_unless_stopping(self, message: ObserveRequest, log: Any) -> JobResult:
        """Watching is resumable: when this observer stops, another one takes over."""
        if self._stopping.is_set():
            raise Abandoned("observer is stopping")
        watching = asyncio.create_task(watch(message, runtime=self._runtime, log=log, policy=self._policy))
        stopping = asyncio.create_task(self._stopping.wait())
        try:
            await asyncio.wait({watching, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            if not watching.done():
                watching.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watching
        if watching.cancelled():
            raise Abandoned("observer is stopping")
        return watching.result()

    async def handle(self, message: Message, delivery: Delivery) -> None:
        assert isinstance(message, ObserveRequest)
        job = message.job
        with structlog.contextvars.bound_contextvars(
            stack_id=job.stack_id,
            traversal_id=job.traversal_id,
            resource=job.resource_name,
            job_id=job.job_id,
        ):
            log = structlog.get_logger("converge.observer")
            log.info(
                "watching", physical_id=job.physical_id, action=job.action.value, attempt=delivery.attempt
            )
            self._metrics.watching.inc()
            try:
                result = await self._watch_unless_stopping(message, log)
            finally:
                self._metrics.watching.dec()
            self._metrics.settled.labels(result.outcome.value).inc()
            log.info("settled", outcome=result.outcome.value, reason=result.reason or None)
            await self._bus.publish(job.reply_to, result)
