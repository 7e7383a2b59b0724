"""`converge-engine`: the engine process.

    converge-engine [serve]   connect, migrate, serve the API; drain on SIGTERM
    converge-engine migrate   apply pending schema migrations and exit

Start-up order: settings (exit 2 if bad) -> logging -> database (embedded
PostgreSQL when CONVERGE_DATABASE_URL is unset) -> migrations -> bus ->
engine service -> Keystone client (Keystone mode) -> HTTP. Shutdown runs the same list backwards.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import sys

import structlog
from prometheus_client import CollectorRegistry

from services.engine.api.app import build_app
from services.engine.api.auth import Tokens
from services.engine.api.keystone import keystone_config, open_keystone
from services.engine.service import EngineService
from services.engine.settings_map import template_pool
from services.engine.store import open_database
from services.engine.template import constraint_registry
from shared.bus.amqp import AmqpBus
from shared.health import Readiness, health_routes, start_http
from shared.host import drain, start_consuming
from shared.logging import configure_logging
from shared.plugins.constraints import load_constraints
from shared.plugins.registry import load_types
from shared.protocol import BUNDLED_QUEUES
from shared.service import run_service
from shared.settings import EngineSettings, load_settings, require_amqp
from shared.tasks import Supervisor

log = structlog.get_logger(__name__)
PROGRAM = "converge-engine"


async def serve(settings: EngineSettings, stop: asyncio.Event) -> None:
    amqp_url = require_amqp(settings, program=PROGRAM)
    registry, readiness = CollectorRegistry(), Readiness()
    supervisor = Supervisor(on_crash=lambda _name, _exc: stop.set())
    async with contextlib.AsyncExitStack() as stack:
        pool = await stack.enter_async_context(open_database(settings, registry=registry))
        bus = await AmqpBus.connect(
            amqp_url,
            prefix=settings.queue_prefix,
            max_deliveries=settings.max_deliveries,
            bundle_max=settings.bus_bundle_max,
            bundled_queues=BUNDLED_QUEUES,
            connection_name=f"{settings.queue_prefix}:engine",
            wait=settings.connect_wait_seconds,
        )
        stack.push_async_callback(bus.close)
        types = load_types()
        constraints = constraint_registry(load_constraints())
        templates = template_pool(settings, types, constraints)
        stack.callback(templates.close)
        await templates.start()
        engine = EngineService.from_settings(
            settings,
            pool=pool,
            bus=bus,
            types=types,
            constraints=constraints,
            templates=templates,
            supervisor=supervisor,
            registry=registry,
        )
        await engine.start()
        stack.push_async_callback(engine.stop)
        stack.push_async_callback(supervisor.stop)
        draining = asyncio.Event()
        readiness.add("not_draining", lambda: not draining.is_set())
        tokens = Tokens.parse(settings.api_tokens)
        keystone = await stack.enter_async_context(open_keystone(keystone_config(settings)))
        if not len(tokens) and keystone is None:
            log.warning("no_api_tokens", hint="set CONVERGE_API_TOKENS; every /v1 request is refused")
        app = build_app(
            health_routes(readiness=readiness, registry=registry),
            api=engine.api(),
            tokens=tokens,
            keystone=keystone,
            readiness=readiness,
        )
        runner = await start_http(app, host=settings.api_host, port=settings.api_port)
        stack.push_async_callback(runner.cleanup)
        subs = await start_consuming(bus, engine.consumptions())
        log.info(
            "ready", engine_id=str(engine.engine_id), api=f"http://{settings.api_host}:{settings.api_port}"
        )
        gc.freeze()  # start-up's objects live as long as the process: full collections skip them
        await stop.wait()
        draining.set()
        log.info("draining")
        await drain(subs, seconds=settings.drain_seconds)


async def migrate_only(settings: EngineSettings) -> None:
    async with open_database(settings):
        log.info("migrated")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROGRAM, description="Converge engine")
    parser.add_argument("command", nargs="?", default="serve", choices=["serve", "migrate"])
    args = parser.parse_args(argv)
    settings = load_settings(EngineSettings, program=PROGRAM)
    configure_logging(level=settings.log_level, fmt=settings.log_format)
    if args.command == "migrate":
        return run_service(
            lambda _stop: migrate_only(settings), name="engine", event_loop=settings.event_loop
        )
    return run_service(lambda stop: serve(settings, stop), name="engine", event_loop=settings.event_loop)


if __name__ == "__main__":
    sys.exit(main())
