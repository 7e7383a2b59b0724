"""`converge up`: engine, worker, observer and a sandbox cloud in one process, zero setup.

Embedded defaults: PostgreSQL from pgserver under CONVERGE_DATA_DIR (state
survives restarts) and the in-process bus; CONVERGE_DATABASE_URL /
CONVERGE_AMQP_URL switch to real servers. Every HTTP endpoint (API, health,
metrics, and the sandbox cloud under `/sandbox`) is served on the one API
port; the Sandbox::* types reach the in-process sandbox there (or the one at
CONVERGE_SANDBOX_URL, when set, instead), and its change notifications go to
the same bus, where the observer consumes them. The sandbox keeps its state
in `<data_dir>/sandbox.sqlite3` (or CONVERGE_SANDBOX_STATE).

Nothing is lost when the process is killed at any instant: what the
in-process bus held dies with it, so with that bus the engine sends all work
in flight again at start-up (services/engine/recovery.py), before the worker
and observer start taking messages; they start once the API (and the sandbox
they call) is served. Shutdown (Ctrl-C / SIGTERM): stop taking messages,
drain in-flight work (what is left is sent again at the next start), stop
the engine, save the sandbox, close the bus, stop PostgreSQL. With
CONVERGE_API_TOKENS set no demo token is generated or printed: the
operator's tokens are the only ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import sys
from pathlib import Path

import aiohttp
import structlog
from prometheus_client import CollectorRegistry

from services.cli.credentials import FILE_NAME, Credentials, ensure_credentials
from services.cli.launch import next_steps
from services.engine.api.app import build_app
from services.engine.api.auth import Principal, Tokens
from services.engine.api.keystone import keystone_config, open_keystone
from services.engine.service import EngineService
from services.engine.settings_map import public_url, template_pool
from services.engine.store import open_database
from services.engine.template import constraint_registry
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
from shared.logging import log_context
from shared.plugins.constraints import load_constraints
from shared.plugins.registry import load_types
from shared.plugins.runtime import PluginRuntime
from shared.protocol import BUNDLED_QUEUES, ENGINE_QUEUE, JOBS_QUEUE, OBSERVE_QUEUE
from shared.settings import UpSettings, allow_endpoints, own_ports, plugin_endpoints
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
        bundle_max=settings.bus_bundle_max,
        bundled_queues=BUNDLED_QUEUES,
        connection_name=f"{settings.queue_prefix}:up",
        wait=settings.connect_wait_seconds,
    )


def refused_credentials(data_dir: Path, tokens: Tokens) -> Path | None:
    """The credentials.json of an earlier run without CONVERGE_API_TOKENS, if its token is
    not among this run's (the CLI would still find it there)."""
    path = data_dir / FILE_NAME
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    token = stored.get("token") if isinstance(stored, dict) else None
    return path if isinstance(token, str) and tokens.lookup(token) is None else None


def banner(
    api_url: str,
    credentials: Credentials | None,
    settings: UpSettings,
    sandbox_url: str,
    *,
    refused: Path | None = None,
) -> str:
    """What `up` tells the user: where the API is and how to authenticate. With
    CONVERGE_API_TOKENS set the tokens are the operator's: none is generated or printed,
    and the CLI needs CONVERGE_TOKEN and CONVERGE_PROJECT (a credentials.json an earlier
    run without them left holds a token this run refuses: say so)."""
    if credentials is not None:
        api = f"{api_url}/v1/{credentials.project_id}"
        token = f"  Token:   {credentials.token}"
        steps = next_steps(api_url, credentials.token)
        export = f"Next, in another terminal (in {Path.cwd()}):\n" + "\n".join(f"  {s}" for s in steps)
    else:
        api = f"{api_url}/v1/<project>"
        token = "  Tokens:  from CONVERGE_API_TOKENS (none is generated)"
        export = (
            f"  export CONVERGE_URL={api_url}   # and CONVERGE_TOKEN, CONVERGE_PROJECT: one of those tokens"
        )
        if refused is not None:
            token += f"\n  Note:    the token in {refused.resolve()} is not one of them: it is refused"
    return "\n".join(
        [
            "Converge is up.",
            f"  API:     {api}",
            token,
            f"  Data:    {settings.data_dir.resolve()}",
            f"  Sandbox: {sandbox_url}/v1/inventory",
            f"  Dashboard: {api_url}/",
            export,
            "Press Ctrl-C to stop.",
        ]
    )


async def up(settings: UpSettings, stop: asyncio.Event) -> None:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    api_url = f"http://{settings.api_host}:{settings.api_port}"
    # With CONVERGE_API_TOKENS set no demo token is made: it would not work.
    credentials = None if settings.api_tokens else ensure_credentials(settings.data_dir, url=api_url)
    types = load_types()
    constraints = constraint_registry(load_constraints())
    registry, readiness = CollectorRegistry(), Readiness()
    supervisor = Supervisor(on_crash=lambda _name, _exc: stop.set())
    async with contextlib.AsyncExitStack() as stack:
        pool = await stack.enter_async_context(open_database(settings, registry=registry))
        bus = await open_bus(settings)
        stack.push_async_callback(bus.close)
        session = await stack.enter_async_context(aiohttp.ClientSession())
        templates = template_pool(settings, types, constraints)
        stack.callback(templates.close)
        await templates.start()
        with log_context(service="engine"):
            engine = EngineService.from_settings(
                settings,
                pool=pool,
                bus=bus,
                types=types,
                constraints=constraints,
                templates=templates,
                supervisor=supervisor,
                registry=registry,
                # The in-process bus starts empty: everything in flight was lost with it.
                recover_at_start=settings.amqp_url is None,
            )
            await engine.start()
            engine_subs = await start_consuming(bus, engine.consumptions())
        stack.push_async_callback(engine.stop)
        stack.push_async_callback(supervisor.stop)
        sandbox: SandboxService | None = None
        sandbox_url = settings.sandbox_url
        if sandbox_url is None:
            with log_context(service="sandbox"):
                state = settings.sandbox_state or settings.data_dir / "sandbox.sqlite3"
                sandbox = build_sandbox(settings, bus=bus, registry=registry, state=state)
                stack.push_async_callback(sandbox.close)
                sandbox.start(supervisor)
            sandbox_url = f"{api_url}{SANDBOX_MOUNT}"
        endpoints = plugin_endpoints(sandbox_url=sandbox_url)
        allow = AllowList.parse(
            allow_endpoints(settings.http_allowed_hosts, endpoints),
            protected_ports=own_ports(settings.http_protected_ports, ports=[settings.api_port]),
        )
        runtime = PluginRuntime(
            types=types,
            http=HttpGateway(session, allow),
            api_url=public_url(settings),  # as the engine's deployment signal URLs
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
        draining = asyncio.Event()
        readiness.add("not_draining", lambda: not draining.is_set())
        tokens = (
            Tokens({credentials.token: Principal(credentials.project_id)})
            if credentials is not None
            else Tokens.parse(settings.api_tokens)
        )
        keystone = await stack.enter_async_context(open_keystone(keystone_config(settings)))
        app = build_app(
            health_routes(readiness=readiness, registry=registry),
            api=engine.api(),
            tokens=tokens,
            keystone=keystone,
            readiness=readiness,
        )
        if sandbox is not None:
            app.add_subapp(SANDBOX_MOUNT, build_sandbox_app(sandbox))
        runner = await start_http(app, host=settings.api_host, port=settings.api_port)
        stack.push_async_callback(runner.cleanup)
        # Actions reach the sandbox (and signal URLs the API) through the port just opened.
        with log_context(service="worker"):
            subs = engine_subs + await start_consuming(bus, worker.consumptions())
        with log_context(service="observer"):
            subs += await start_consuming(bus, observer.consumptions())
        refused = refused_credentials(settings.data_dir, tokens) if credentials is None else None
        print(
            banner(api_url, credentials, settings, sandbox_url, refused=refused), file=sys.stdout, flush=True
        )
        log.info(
            "ready",
            api=api_url,
            database="embedded" if settings.database_url is None else "external",
            bus="in-process" if settings.amqp_url is None else "amqp",
            sandbox=sandbox_url,
        )
        # What start-up loaded (modules, types, the app: ~100k objects) lives as long as the
        # process; frozen, full garbage collections stop scanning it on every pass, which
        # kept the event loop (the API, /healthz) paused tens of milliseconds each time.
        gc.freeze()
        await stop.wait()
        draining.set()
        log.info("draining")
        abandon_resumable(observer.consumptions())
        await drain(subs, seconds=settings.drain_seconds)
        if isinstance(bus, MemoryBus):  # dies with the process; the next start sends it again
            left = {queue: await bus.depth(queue) for queue in (ENGINE_QUEUE, JOBS_QUEUE, OBSERVE_QUEUE)}
            log.info("unfinished_messages_left", **left)
        if sandbox is not None:
            await sandbox.flush(seconds=settings.drain_seconds)
