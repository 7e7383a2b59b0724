"""The worker's handler: one `ResourceJob` in, one `JobResult` out.

Binds the job's identity to the log context, runs the job (`runner.py`) and
returns the result as its reply: the bus publishes it to the engine, batched
with the results of the other jobs that finish meanwhile (one confirm wait per
batch), and only then acknowledges the job. Jobs run concurrently up to the
prefetch (`CONVERGE_WORKER_CONCURRENCY`). Hosted by `converge-worker` and by
`converge up` alike.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from services.worker.runner import run_job
from shared.bus import Bus, Delivery, Outgoing
from shared.host import Consumption
from shared.logging import log_context
from shared.messages import Codec, Message
from shared.plugins.runtime import PluginRuntime
from shared.protocol import JOBS_QUEUE, ResourceJob

CODEC = Codec([ResourceJob])


class WorkerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.jobs = Counter(
            "converge_worker_jobs",
            "Jobs run, by type, action and outcome.",
            ["type", "action", "outcome"],
            registry=registry,
        )
        self.seconds = Histogram(
            "converge_worker_job_seconds", "Time to run one job.", ["type", "action"], registry=registry
        )
        self.in_flight = Gauge("converge_worker_jobs_in_flight", "Jobs running now.", registry=registry)


class WorkerService:
    def __init__(self, *, bus: Bus, deps: PluginRuntime, concurrency: int, metrics: WorkerMetrics) -> None:
        self._bus = bus
        self._deps = deps
        self._concurrency = concurrency
        self._metrics = metrics

    def consumptions(self) -> list[Consumption]:
        return [Consumption(JOBS_QUEUE, self.handle, prefetch=self._concurrency, codec=CODEC)]

    def admin_routes(self) -> list[web.RouteDef]:
        return []  # pause/resume come with every hosted service (shared.host)

    async def handle(self, message: Message, delivery: Delivery) -> Sequence[Outgoing]:
        assert isinstance(message, ResourceJob)
        job = message
        with log_context(
            stack_id=job.stack_id,
            traversal_id=job.traversal_id,
            resource=job.resource_name,
            job_id=job.job_id,
        ):
            log = structlog.get_logger("converge.worker")
            log.debug(
                "job_started", action=job.action.value, type=job.resource_type, attempt=delivery.attempt
            )
            started = time.monotonic()
            self._metrics.in_flight.inc()
            try:
                result = await run_job(job, deps=self._deps, log=log)
            finally:
                self._metrics.in_flight.dec()
            elapsed = time.monotonic() - started
            self._metrics.jobs.labels(job.resource_type, job.action.value, result.outcome.value).inc()
            self._metrics.seconds.labels(job.resource_type, job.action.value).observe(elapsed)
            log.debug(
                "job_finished",
                outcome=result.outcome.value,
                physical_id=result.physical_id,
                reason=result.reason or None,
                seconds=round(elapsed, 3),
            )
            return [Outgoing(job.reply_to, result)]
