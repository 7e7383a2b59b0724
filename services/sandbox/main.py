"""`converge-sandbox`: the sandbox cloud as its own process.

Start-up: settings (exit 2 if bad) -> logging -> bus (only when
CONVERGE_AMQP_URL is set; without it no notifications are published) ->
HTTP API with /healthz, /readyz, /metrics on CONVERGE_SANDBOX_PORT -> build
timer and notification publisher -> `ready`. SIGTERM/SIGINT stops the HTTP
server, lets queued notifications go out (within CONVERGE_DRAIN_SECONDS),
and exits 0. The cloud lives in memory, and also in the SQLite file
CONVERGE_SANDBOX_STATE when set (every change on disk before its answer), from
which a restarted sandbox carries on as the same cloud; unset, a restart
starts an empty cloud.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys

import structlog
from prometheus_client import CollectorRegistry

from services.sandbox.app import build_app
from services.sandbox.service import build_sandbox
from shared.bus import Bus
from shared.bus.amqp import AmqpBus
from shared.errors import PermanentError
from shared.health import Readiness, health_routes, start_http
from shared.logging import configure_logging
from shared.service import run_service
from shared.settings import SandboxSettings, load_settings
from shared.tasks import Supervisor

PROGRAM = "converge-sandbox"

log = structlog.get_logger(__name__)


async def serve(settings: SandboxSettings, stop: asyncio.Event) -> None:
    registry, readiness = CollectorRegistry(), Readiness()
    supervisor = Supervisor(on_crash=lambda _name, _exc: stop.set())
    async with contextlib.AsyncExitStack() as stack:
        bus: Bus | None = None
        if settings.amqp_url is not None:
            amqp = await AmqpBus.connect(
                settings.amqp_url,
                prefix=settings.queue_prefix,
                max_deliveries=settings.max_deliveries,
                bundle_max=settings.bus_bundle_max,
                connection_name=f"{settings.queue_prefix}:sandbox",
                wait=settings.connect_wait_seconds,
            )
            stack.push_async_callback(amqp.close)
            bus = amqp
        sandbox = build_sandbox(settings, bus=bus, registry=registry, state=settings.sandbox_state)
        stack.push_async_callback(sandbox.close)
        draining = asyncio.Event()
        readiness.add("not_draining", lambda: not draining.is_set())
        app = build_app(sandbox, extra_routes=health_routes(readiness=readiness, registry=registry))
        url = f"http://{settings.sandbox_host}:{settings.sandbox_port}"
        try:
            runner = await start_http(app, host=settings.sandbox_host, port=settings.sandbox_port)
        except OSError as exc:
            raise PermanentError(f"cannot serve the sandbox on {url}: {exc}") from exc
        stack.push_async_callback(supervisor.stop)
        try:
            sandbox.start(supervisor)
            log.info(
                "ready",
                api=f"{url}/v1",
                notifications=sandbox.notification_queue,
                latency=settings.sandbox_latency,
                failure_rate=settings.sandbox_failure_rate,
            )
            await stop.wait()
            draining.set()
            log.info("draining")
        finally:
            await runner.cleanup()
        await sandbox.flush(seconds=settings.drain_seconds)


def main() -> int:
    settings = load_settings(SandboxSettings, program=PROGRAM)
    configure_logging(level=settings.log_level, fmt=settings.log_format)
    return run_service(lambda stop: serve(settings, stop), name="sandbox", event_loop=settings.event_loop)


if __name__ == "__main__":
    sys.exit(main())
