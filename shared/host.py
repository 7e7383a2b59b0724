"""Hosting a consumer service (worker, observer) in its own process.

Order on start: connect the bus, start the health server, start consuming,
log `ready`. On the stop event: mark not ready, stop consuming and let
in-flight handlers finish (bounded by `drain_seconds`), close the bus.
`converge up` does the same with every service on one shared bus and port.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import aiohttp
import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry

from shared.bus import Bus, Handler, Subscription
from shared.bus.amqp import AmqpBus
from shared.health import Readiness, health_routes, start_http
from shared.http_client import AllowList, HttpGateway
from shared.messages import Codec
from shared.plugins.registry import load_types
from shared.plugins.runtime import PluginRuntime
from shared.settings import ObserverSettings, WorkerSettings, require_amqp

PluginServiceSettings = WorkerSettings | ObserverSettings

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Consumption:
    """One queue a service consumes, with its handler and prefetch."""

    queue: str
    handler: Handler
    prefetch: int
    codec: Codec
    #: Called when draining starts, for handlers whose work is resumable
    #: elsewhere (an observer's watch): they give their messages back at once.
    abandon: Callable[[], None] | None = None


async def start_consuming(bus: Bus, consumptions: Sequence[Consumption]) -> list[Subscription]:
    subs: list[Subscription] = []
    for c in consumptions:
        subs.append(await bus.consume(c.queue, c.handler, prefetch=c.prefetch, codec=c.codec))
        log.info("consuming", queue=c.queue, prefetch=c.prefetch)
    return subs


def abandon_resumable(consumptions: Sequence[Consumption]) -> None:
    for c in consumptions:
        if c.abandon is not None:
            c.abandon()


async def drain(subs: Sequence[Subscription], *, seconds: float) -> None:
    """Stop consuming; wait (bounded) for in-flight handlers to finish and ack.

    Whatever is still running after `seconds` is abandoned unacknowledged,
    so the broker delivers it again to another consumer: nothing is lost.
    """
    try:
        async with asyncio.timeout(seconds):
            await asyncio.gather(*(sub.stop() for sub in subs))
    except TimeoutError:
        log.warning("drain_timeout", seconds=seconds)


async def host_consumer_service(
    *,
    bus: Bus,
    consumptions: Sequence[Consumption],
    stop: asyncio.Event,
    health_host: str,
    health_port: int,
    registry: CollectorRegistry,
    readiness: Readiness,
    drain_seconds: float,
) -> None:
    draining = asyncio.Event()
    readiness.add("not_draining", lambda: not draining.is_set())
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(bus.close)
        app = web.Application()
        app.add_routes(health_routes(readiness=readiness, registry=registry))
        runner = await start_http(app, host=health_host, port=health_port)
        stack.push_async_callback(runner.cleanup)
        subs = await start_consuming(bus, consumptions)
        log.info("ready", health=f"http://{health_host}:{health_port}")
        await stop.wait()
        draining.set()
        log.info("draining", in_queues=[c.queue for c in consumptions])
        abandon_resumable(consumptions)
        await drain(subs, seconds=drain_seconds)


async def serve_plugin_service(
    settings: PluginServiceSettings,
    stop: asyncio.Event,
    *,
    name: str,
    consumptions: Callable[[Bus, PluginRuntime, CollectorRegistry], Sequence[Consumption]],
    api_url: str = "",
) -> None:
    """Host a service that runs plugin actions (worker, observer) in its own process:
    resource types, the allow-listed HTTP client, the bus, then `host_consumer_service`."""
    amqp_url = require_amqp(settings, program=f"converge-{name}")
    types = load_types()
    allow = AllowList.parse(settings.http_allowed_hosts)
    async with aiohttp.ClientSession() as session:
        bus = await AmqpBus.connect(
            amqp_url,
            prefix=settings.queue_prefix,
            max_deliveries=settings.max_deliveries,
            connection_name=f"{settings.queue_prefix}:{name}",
        )
        registry = CollectorRegistry()
        runtime = PluginRuntime(types=types, http=HttpGateway(session, allow), api_url=api_url)
        await host_consumer_service(
            bus=bus,
            consumptions=consumptions(bus, runtime, registry),
            stop=stop,
            health_host=settings.health_host,
            health_port=settings.health_port,
            registry=registry,
            readiness=Readiness(),
            drain_seconds=settings.drain_seconds,
        )
