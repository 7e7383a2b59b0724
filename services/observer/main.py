"""`converge-observer`: the observer process.

Start-up: settings (exit 2 if bad) -> logging -> bus -> health server ->
consumers -> `ready`. SIGTERM/SIGINT drains in-flight observations and
exits 0. What it consumes grows with the observer issue (completion polling,
provider notifications, drift); today it hosts the process frame: bus
connection, health, metrics and drain.
"""

from __future__ import annotations

import asyncio
import sys

from prometheus_client import CollectorRegistry

from shared.bus.amqp import AmqpBus
from shared.health import Readiness
from shared.host import host_consumer_service
from shared.logging import configure_logging
from shared.service import run_service
from shared.settings import ObserverSettings, load_settings, require_amqp

PROGRAM = "converge-observer"


async def serve(settings: ObserverSettings, stop: asyncio.Event) -> None:
    amqp_url = require_amqp(settings, program=PROGRAM)
    bus = await AmqpBus.connect(
        amqp_url,
        prefix=settings.queue_prefix,
        max_deliveries=settings.max_deliveries,
        connection_name=f"{settings.queue_prefix}:observer",
    )
    await host_consumer_service(
        bus=bus,
        consumptions=[],
        stop=stop,
        health_host=settings.health_host,
        health_port=settings.health_port,
        registry=CollectorRegistry(),
        readiness=Readiness(),
        drain_seconds=settings.drain_seconds,
    )


def main() -> int:
    settings = load_settings(ObserverSettings, program=PROGRAM)
    configure_logging(level=settings.log_level, fmt=settings.log_format)
    return run_service(lambda stop: serve(settings, stop), name="observer")


if __name__ == "__main__":
    sys.exit(main())
