"""`converge up`: engine, worker, observer and a sandbox cloud in one process, zero setup.

Embedded defaults: PostgreSQL from pgserver under CONVERGE_DATA_DIR (state
survives restarts) and the in-process bus; CONVERGE_DATABASE_URL /
CONVERGE_AMQP_URL switch to real servers. Every HTTP endpoint (API, health,
metrics, and the sandbox cloud under `/sandbox`) is served on the one API
port; the Sandbox::* types reach the in-process sandbox there (or the one at
CONVERGE_SANDBOX_URL, when set, instead), and its change notifications go to
the same bus, where the observer consumes them. The sandbox's state is in
memory: a restart empties it. Shutdown (Ctrl-C / SIGTERM): stop taking
messages, drain in-flight work, stop the engine, close the bus, stop
PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from pathlib import Path

import aiohttp
import structlog
from prometheus_client import CollectorRegistry

from services.cli.credentials import ensure_credentials
from services.cli.launch import next_steps
from services.engine.api.app import build_app
from services.engine.api.auth import Principal, Tokens
from services.engine.service import EngineService, heal_policy, quotas, template_limits
from services.engine.store import open_database
from services.observer.service import ObserverMetrics, ObserverService
from services.sandbox.app import build_app as build_sandbox_app
from services.sandbox.service import SandboxService, build_sandbox
from services.worker.service import WorkerMetrics, WorkerService
from shared.bus import Bus
from shared.bus.amqp import AmqpBus
from shared.bus.memory import MemoryBus
from shared.health import Readiness, health_routes, start_http
from shared.host import abandon_resumable, drain, start_consuming
from shared.http_client import AllowList, HttpGateway
from shared.plugins.registry import load_types
from shared.plugins.runtime import PluginRuntime
from shared.settings import UpSettings, allow_endpoints, plugin_endpoints
from shared.tasks import Supervisor

log = structlog.get_logger(__name__)

SANDBOX_MOUNT = "/sandbox"


async def open_bus(settings: UpSettings) -> Bus:
    if settings.amqp_url is None:
        return MemoryBus(max_deliveries=settings.max_deliveries)
    return await AmqpBus.connect(
        settings.amqp_url,
        prefix=settings.queue_prefix,
        max_deliveries=settings.max_deliveries,
        connection_name=f"{settings.queue_prefix}:up",
        wait=settings.connect_wait_seconds,
    )


async def up(settings: UpSettings, stop: asyncio.Event) -> None:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    api_url = f"http://{settings.api_host}:{settings.api_port}"
    credentials = ensure_credentials(settings.data_dir, url=api_url)
    types = load_types()
    registry, readiness = CollectorRegistry(), Readiness()
    supervisor = Supervisor(on_crash=lambda _name, _exc: stop.set())
    async with contextlib.AsyncExitStack() as stack:
        pool = await stack.enter_async_context(open_database(settings))
        bus = await open_bus(settings)
        stack.push_async_callback(bus.close)
        session = await stack.enter_async_context(aiohttp.ClientSession())
        with structlog.contextvars.bound_contextvars(service="engine"):
            engine = EngineService(
                pool=pool,
                bus=bus,
                types=types,
                engine_id=uuid.uuid4(),
                supervisor=supervisor,
                registry=registry,
                limits=template_limits(settings),
                heal=heal_policy(settings),
                quotas=quotas(settings),
            )
            await engine.start()
            engine_subs = await start_consuming(bus, engine.consumptions())
        stack.push_async_callback(engine.stop)
        stack.push_async_callback(supervisor.stop)
        sandbox: SandboxService | None = None
        sandbox_url = settings.sandbox_url
        if sandbox_url is None:
            with structlog.contextvars.bound_contextvars(service="sandbox"):
                sandbox = build_sandbox(settings, bus=bus, registry=registry)
                sandbox.start(supervisor)
            sandbox_url = f"{api_url}{SANDBOX_MOUNT}"
        endpoints = plugin_endpoints(sandbox_url=sandbox_url)
        runtime = PluginRuntime(
            types=types,
            http=HttpGateway(
                session, AllowList.parse(allow_endpoints(settings.http_allowed_hosts, endpoints))
            ),
            api_url=api_url,
            endpoints=endpoints,
        )
        worker = WorkerService(
            bus=bus, deps=runtime, concurrency=settings.worker_concurrency, metrics=WorkerMetrics(registry)
        )
        observer = ObserverService(
            bus=bus,
            runtime=runtime,
            concurrency=settings.observer_concurrency,
            metrics=ObserverMetrics(registry),
            providers=tuple(endpoints),
        )
        with structlog.contextvars.bound_contextvars(service="worker"):
            subs = engine_subs + await start_consuming(bus, worker.consumptions())
        with structlog.contextvars.bound_contextvars(service="observer"):
            subs += await start_consuming(bus, observer.consumptions())
        draining = asyncio.Event()
        readiness.add("not_draining", lambda: not draining.is_set())
        tokens = (
            Tokens.parse(settings.api_tokens)
            if settings.api_tokens
            else Tokens({credentials.token: Principal(credentials.project_id)})
        )
        app = build_app(
            health_routes(readiness=readiness, registry=registry),
            api=engine.api(),
            tokens=tokens,
            readiness=readiness,
        )
        if sandbox is not None:
            app.add_subapp(SANDBOX_MOUNT, build_sandbox_app(sandbox))
        runner = await start_http(app, host=settings.api_host, port=settings.api_port)
        stack.push_async_callback(runner.cleanup)
        print(
            f"Converge is up.\n"
            f"  API:     {api_url}/v1/{credentials.project_id}\n"
            f"  Token:   {credentials.token}\n"
            f"  Data:    {settings.data_dir.resolve()}\n"
            f"  Sandbox: {sandbox_url}/v1/inventory\n"
            f"  Dashboard: {api_url}/\n"
            f"Next, in another terminal (in {Path.cwd()}):\n"
            + "".join(f"  {line}\n" for line in next_steps(api_url, credentials.token))
            + "Press Ctrl-C to stop.",
            file=sys.stdout,
            flush=True,
        )
        log.info(
            "ready",
            api=api_url,
            database="embedded" if settings.database_url is None else "external",
            bus="in-process" if settings.amqp_url is None else "amqp",
            sandbox=sandbox_url,
        )
        await stop.wait()
        draining.set()
        log.info("draining")
        abandon_resumable(observer.consumptions())
        await drain(subs, seconds=settings.drain_seconds)
        if sandbox is not None:
            await sandbox.flush(seconds=settings.drain_seconds)
