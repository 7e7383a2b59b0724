"""`converge-worker`: the worker process.

Start-up: settings (exit 2 if bad) -> logging -> resource types (entry
points) -> HTTP client (allow-listed) -> bus -> health server -> consume
`jobs` -> `ready`. SIGTERM/SIGINT stops taking jobs, lets running ones finish
within CONVERGE_DRAIN_SECONDS (the rest are redelivered elsewhere) and exits 0.
"""

from __future__ import annotations

import asyncio
import sys

import aiohttp
from prometheus_client import CollectorRegistry

from services.worker.service import WorkerMetrics, WorkerService
from shared.bus.amqp import AmqpBus
from shared.health import Readiness
from shared.host import host_consumer_service
from shared.http_client import AllowList, HttpGateway
from shared.logging import configure_logging
from shared.plugins.registry import load_types
from shared.plugins.runtime import PluginRuntime
from shared.service import run_service
from shared.settings import WorkerSettings, load_settings, require_amqp

PROGRAM = "converge-worker"


async def serve(settings: WorkerSettings, stop: asyncio.Event) -> None:
    amqp_url = require_amqp(settings, program=PROGRAM)
    types = load_types()
    allow = AllowList.parse(settings.http_allowed_hosts)
    async with aiohttp.ClientSession() as session:
        bus = await AmqpBus.connect(
            amqp_url,
            prefix=settings.queue_prefix,
            max_deliveries=settings.max_deliveries,
            connection_name=f"{settings.queue_prefix}:worker",
        )
        registry = CollectorRegistry()
        worker = WorkerService(
            bus=bus,
            deps=PluginRuntime(
                types=types, http=HttpGateway(session, allow), api_url=settings.public_api_url
            ),
            concurrency=settings.worker_concurrency,
            metrics=WorkerMetrics(registry),
        )
        await host_consumer_service(
            bus=bus,
            consumptions=worker.consumptions(),
            stop=stop,
            health_host=settings.health_host,
            health_port=settings.health_port,
            registry=registry,
            readiness=Readiness(),
            drain_seconds=settings.drain_seconds,
        )


def main() -> int:
    settings = load_settings(WorkerSettings, program=PROGRAM)
    configure_logging(level=settings.log_level, fmt=settings.log_format)
    return run_service(lambda stop: serve(settings, stop), name="worker")


if __name__ == "__main__":
    sys.exit(main())
