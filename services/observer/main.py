"""`converge-observer`: the observer process.

Start-up: settings (exit 2 if bad) -> logging -> resource types -> HTTP
client (allow-listed) -> bus -> health server -> consume `observe` ->
`ready`. SIGTERM/SIGINT stops taking requests, lets running watches finish
within CONVERGE_DRAIN_SECONDS (the rest go to another observer) and exits 0.
"""

from __future__ import annotations

import asyncio
import sys

import aiohttp
from prometheus_client import CollectorRegistry

from services.observer.service import ObserverMetrics, ObserverService
from shared.bus.amqp import AmqpBus
from shared.health import Readiness
from shared.host import host_consumer_service
from shared.http_client import AllowList, HttpGateway
from shared.logging import configure_logging
from shared.plugins.registry import load_types
from shared.plugins.runtime import PluginRuntime
from shared.service import run_service
from shared.settings import ObserverSettings, load_settings, require_amqp

PROGRAM = "converge-observer"


async def serve(settings: ObserverSettings, stop: asyncio.Event) -> None:
    amqp_url = require_amqp(settings, program=PROGRAM)
    types = load_types()
    allow = AllowList.parse(settings.http_allowed_hosts)
    async with aiohttp.ClientSession() as session:
        bus = await AmqpBus.connect(
            amqp_url,
            prefix=settings.queue_prefix,
            max_deliveries=settings.max_deliveries,
            connection_name=f"{settings.queue_prefix}:observer",
        )
        registry = CollectorRegistry()
        observer = ObserverService(
            bus=bus,
            runtime=PluginRuntime(types=types, http=HttpGateway(session, allow)),
            concurrency=settings.observer_concurrency,
            metrics=ObserverMetrics(registry),
        )
        await host_consumer_service(
            bus=bus,
            consumptions=observer.consumptions(),
            stop=stop,
            health_host=settings.health_host,
            health_port=settings.health_port,
            registry=registry,
            readiness=Readiness(),
            drain_seconds=settings.drain_seconds,
        )


def main() -> int:
    settings = load_settings(ObserverSettings, program=PROGRAM)
    configure_logging(level=settings.log_level, fmt=settings.log_format)
    return run_service(lambda stop: serve(settings, stop), name="observer")


if __name__ == "__main__":
    sys.exit(main())
