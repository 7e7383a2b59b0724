"""Hosting a consumer service (worker, observer) in its own process.

Order on start: connect the bus, start the health server, start consuming,
log `ready`. On the stop event: mark not ready, stop consuming and let
in-flight handlers finish (bounded by `drain_seconds`), close the bus.
`converge up` does the same with every service on one shared bus and port.

Beside the health routes, each process serves an admin API on its health
port: `POST /admin/pause` stops taking messages (in-flight work finishes;
`/readyz` turns 503), `POST /admin/resume` takes them again, `GET /admin`
shows the state; a service may add its own admin routes (the observer lists
what it is watching). Operators pause a process to drain it before scaling
down; the health port is meant for the cluster network, not the public.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

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
from shared.protocol import BUNDLED_QUEUES
from shared.settings import ObserverSettings, WorkerSettings, allow_endpoints, own_ports, require_amqp

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


async def drain(
    subs: Sequence[Subscription], *, seconds: float, stopping: Sequence[Awaitable[None]] = ()
) -> None:
    """Stop consuming; wait (bounded) for in-flight handlers to finish and ack (and for
    the `stopping` subscriptions already told to stop).

    Whatever is still running after `seconds` is abandoned unacknowledged:
    RabbitMQ delivers it again to another consumer. The in-process bus hands it
    back to its own queue, which dies with the process: there the engine's
    start-up recovery sends that work again (services/engine/recovery.py).
    """
    try:
        async with asyncio.timeout(seconds):
            await asyncio.gather(*(sub.stop() for sub in subs), *stopping)
    except TimeoutError:
        log.warning("drain_timeout", seconds=seconds)


class Hosted(Protocol):
    """A consumer service as its process hosts it."""

    def consumptions(self) -> list[Consumption]: ...

    def admin_routes(self) -> list[web.RouteDef]: ...


class Consumers:
    """The subscriptions of one process, which an operator can pause and resume."""

    def __init__(self, bus: Bus, consumptions: Sequence[Consumption]) -> None:
        self._bus = bus
        self._consumptions = consumptions
        self._subs: list[Subscription] = []
        self._stopping: set[asyncio.Task[None]] = set()
        self.paused = False

    async def start(self) -> None:
        self._subs = await start_consuming(self._bus, self._consumptions)

    def pause(self) -> bool:
        """Stop taking messages; what is in flight finishes in the background."""
        if self.paused:
            return False
        self.paused = True
        for sub in self._subs:
            task = asyncio.create_task(sub.stop())
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)
        self._subs = []
        log.info("paused", queues=[c.queue for c in self._consumptions])
        return True

    async def resume(self) -> bool:
        if not self.paused:
            return False
        self._subs = await start_consuming(self._bus, self._consumptions)
        self.paused = False
        log.info("resumed")
        return True

    async def drain(self, *, seconds: float) -> None:
        abandon_resumable(self._consumptions)
        subs, self._subs = self._subs, []
        await drain(subs, seconds=seconds, stopping=list(self._stopping))

    def routes(self) -> list[web.RouteDef]:
        async def show(_: web.Request) -> web.Response:
            return web.json_response(self._state())

        async def pause(_: web.Request) -> web.Response:
            self.pause()
            return web.json_response(self._state())

        async def resume(_: web.Request) -> web.Response:
            await self.resume()
            return web.json_response(self._state())

        return [web.get("/admin", show), web.post("/admin/pause", pause), web.post("/admin/resume", resume)]

    def _state(self) -> dict[str, Any]:
        return {"paused": self.paused, "queues": [c.queue for c in self._consumptions]}


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
    admin_routes: Sequence[web.RouteDef] = (),
) -> None:
    draining = asyncio.Event()
    consumers = Consumers(bus, consumptions)
    readiness.add("not_draining", lambda: not draining.is_set())
    readiness.add("not_paused", lambda: not consumers.paused)
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(bus.close)
        app = web.Application()
        app.add_routes(health_routes(readiness=readiness, registry=registry))
        app.add_routes([*consumers.routes(), *admin_routes])
        runner = await start_http(app, host=health_host, port=health_port)
        stack.push_async_callback(runner.cleanup)
        await consumers.start()
        log.info("ready", health=f"http://{health_host}:{health_port}")
        await stop.wait()
        draining.set()
        log.info("draining", in_queues=[c.queue for c in consumptions])
        await consumers.drain(seconds=drain_seconds)


async def serve_plugin_service(
    settings: PluginServiceSettings,
    stop: asyncio.Event,
    *,
    name: str,
    service: Callable[[Bus, PluginRuntime, CollectorRegistry], Hosted],
    api_url: str = "",
    endpoints: Mapping[str, str] | None = None,
) -> None:
    """Host a service that runs plugin actions (worker, observer) in its own process:
    resource types, the allow-listed HTTP client (the `endpoints` catalog's hosts are
    allowed too), the bus, then `host_consumer_service`."""
    amqp_url = require_amqp(settings, program=f"converge-{name}")
    types = load_types()
    endpoints = dict(endpoints or {})
    protected = own_ports(settings.http_protected_ports, ports=[settings.health_port], urls=[api_url])
    allow = AllowList.parse(
        allow_endpoints(settings.http_allowed_hosts, endpoints), protected_ports=protected
    )
    async with aiohttp.ClientSession() as session:
        bus = await AmqpBus.connect(
            amqp_url,
            prefix=settings.queue_prefix,
            max_deliveries=settings.max_deliveries,
            bundle_max=settings.bus_bundle_max,
            bundled_queues=BUNDLED_QUEUES,
            connection_name=f"{settings.queue_prefix}:{name}",
            wait=settings.connect_wait_seconds,
        )
        registry = CollectorRegistry()
        runtime = PluginRuntime(
            types=types, http=HttpGateway(session, allow), api_url=api_url, endpoints=endpoints
        )
        hosted = service(bus, runtime, registry)
        await host_consumer_service(
            bus=bus,
            consumptions=hosted.consumptions(),
            admin_routes=hosted.admin_routes(),
            stop=stop,
            health_host=settings.health_host,
            health_port=settings.health_port,
            registry=registry,
            readiness=Readiness(),
            drain_seconds=settings.drain_seconds,
        )
