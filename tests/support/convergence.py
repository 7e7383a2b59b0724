"""A whole Converge in one process for protocol scenarios.

Real: PostgreSQL (a fresh, migrated database per scenario), the engine's
convergence code, the worker, the plugins. The bus is the in-process one,
with a seeded shuffle of delivery order and duplicated deliveries, so a
scenario replays under many interleavings; the "cloud" is a `World`.

With a `CrashPlan` two engines consume, and the plan (seeded) decides where
they crash (tests/support/crashes.py): between two steps of a handler, each
crashed engine replaced by a fresh one on the same database. Operations then
go through an engine of their own that consumes nothing and never crashes,
as a test process's API client would reach a surviving engine.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
from prometheus_client import CollectorRegistry

from services.engine.api.app import build_app
from services.engine.api.auth import Tokens
from services.engine.core.model import StackId
from services.engine.core.sources import RANDOM_IDS, Ids
from services.engine.goals import Goal
from services.engine.service import EngineService
from services.engine.store import connect
from services.engine.store.migrate import migrate
from services.engine.template import constraint_registry
from services.observer.completion import PollPolicy
from services.observer.service import ObserverMetrics, ObserverService
from services.worker.service import WorkerMetrics, WorkerService
from shared.bus.memory import Chaos, MemoryBus
from shared.health import Readiness, health_routes, start_http
from shared.host import abandon_resumable, start_consuming
from shared.plugins.constraints import load_constraints
from shared.plugins.registry import load_types
from shared.plugins.runtime import PluginRuntime
from shared.protocol import ENGINE_QUEUE, JOBS_QUEUE, OBSERVE_QUEUE
from shared.settings import EngineSettings
from shared.tasks import Supervisor
from tests.support.crashes import CrashingEngines, CrashPlan
from tests.support.engine_settings import engine_settings
from tests.support.ports import free_port
from tests.support.waiting import stack_settled
from tests.support.world import World, thing_type


@dataclass
class Converge:
    engine: EngineService
    world: World
    pool: asyncpg.Pool
    api_port: int = 0
    project: str = "p1"
    engines: CrashingEngines | None = None  # crash mode: the consuming engines

    @property
    def crashes(self) -> list[str]:
        """Where each injected engine crash happened (crash mode)."""
        return list(self.engines.crashes) if self.engines is not None else []

    async def dead_letters(self) -> list[str]:
        """Every queue's dead letters, as `queue: error` (none = no message was given up on)."""
        letters = []
        for queue in (ENGINE_QUEUE, JOBS_QUEUE, OBSERVE_QUEUE):
            letters += [f"{d.queue}: {d.error}" for d in await self.engine.bus.dead_letters(queue)]
        return letters

    async def create(
        self,
        name: str,
        template: Mapping[str, Any],
        *,
        rollback: bool = False,
        timeout_mins: int | None = None,
        **params: Any,
    ) -> StackId:
        return await self.engine.operations.create(
            project_id=self.project,
            name=name,
            goal=Goal(template, parameters=params),
            disable_rollback=not rollback,
            timeout_mins=timeout_mins,
        )

    async def time_passes(self, seconds: float) -> None:
        """Let the engine's timeout scheduler see the clock `seconds` ahead."""
        await self.engine.convergence.expire_overdue(now=time.time() + seconds)

    async def cancel(self, stack_id: StackId, *, rollback: bool) -> None:
        await self.engine.operations.cancel(stack_id, rollback=rollback)

    async def update(self, stack_id: StackId, template: Mapping[str, Any], **params: Any) -> None:
        await self.engine.operations.update(stack_id, Goal(template, parameters=params))

    async def delete(self, stack_id: StackId) -> None:
        await self.engine.operations.delete(stack_id)

    async def settled(self, stack_id: StackId, *, timeout: float = 30) -> tuple[str, str, str]:
        """Wait (bounded) until the stack's operation ended; (action, status, reason)."""
        return await stack_settled(self.pool, stack_id, timeout=timeout, every=0.02)

    @contextlib.asynccontextmanager
    async def http(self, tokens: str) -> AsyncIterator[str]:
        """Serve the engine's real HTTP app on 127.0.0.1; yields the base URL."""
        health = health_routes(readiness=Readiness(), registry=CollectorRegistry())
        app = build_app(health, api=self.engine.api(), tokens=Tokens.parse(tokens))
        runner = await start_http(app, host="127.0.0.1", port=self.api_port)
        try:
            yield f"http://127.0.0.1:{self.api_port}"
        finally:
            await runner.cleanup()

    async def state(self, stack_id: uuid.UUID) -> tuple[str, str]:
        row = await self.pool.fetchrow("SELECT action, status FROM stacks WHERE stack_id = $1", stack_id)
        assert row is not None
        return row["action"], row["status"]

    async def rows(self, stack_id: StackId) -> list[asyncpg.Record]:
        return list(
            await self.pool.fetch(
                "SELECT * FROM resources WHERE stack_id = $1 ORDER BY resource_id", stack_id
            )
        )

    async def events(self, stack_id: StackId) -> list[asyncpg.Record]:
        return list(
            await self.pool.fetch("SELECT * FROM events WHERE stack_id = $1 ORDER BY event_seq", stack_id)
        )


def record_published(cv: Converge, kind: str, field: str) -> list[Any]:
    """`field` of each message of `kind` published on the engine queue from now on (a
    list that grows as they are)."""
    sent: list[Any] = []
    bus = cv.engine.bus
    publish = bus.publish_raw_batch

    async def recording(bodies: Sequence[tuple[str, bytes]]) -> None:
        for queue, body in bodies:
            message = json.loads(body)
            if queue == ENGINE_QUEUE and message.get("kind") == kind:
                sent.append(message[field])
        await publish(bodies)

    bus.publish_raw_batch = recording  # type: ignore[method-assign]
    return sent


@contextlib.asynccontextmanager
async def converge(
    database_url: str,
    *,
    seed: int,
    duplicate_rate: float = 0.2,
    resend_rate: float = 0.0,
    crashes: CrashPlan | None = None,
    settings: EngineSettings | None = None,
    ids: Ids = RANDOM_IDS,
) -> AsyncIterator[Converge]:
    """`ids`: where the engine's new ids come from (`core.sources`).
    `resend_rate`: the chance that a message is also sent again under a new id (as
    recovery sends work in flight again), which the engine's inbox does not drop.
    `settings`: the engine's (tests.support.engine_settings; default: the defaults),
    from which every engine here is built as `converge-engine` builds its own."""
    settings = settings or engine_settings()
    api_port = free_port()  # where `http` serves the API: the engine's signal URLs point there
    if settings.public_api_url is None:
        settings = settings.model_copy(update={"public_api_url": f"http://127.0.0.1:{api_port}"})
    world = World()
    types = {**load_types(), "Test::Thing": thing_type(world)}
    constraints = constraint_registry(load_constraints())  # as the engine's main loads them
    pool = await connect(database_url, size=5)
    async with pool.acquire() as conn:
        await migrate(conn)
    chaos = Chaos(seed=seed, reorder=True, duplicate_rate=duplicate_rate, resend_rate=resend_rate)
    bus = MemoryBus(max_deliveries=settings.max_deliveries, chaos=chaos)  # production's by default
    supervisor = Supervisor()
    engine = EngineService.from_settings(
        settings, pool=pool, bus=bus, types=types, constraints=constraints, supervisor=supervisor, ids=ids
    )
    engines: CrashingEngines | None = None
    if crashes is not None:
        # Relay quickly: a crash between commit and publish leaves outbox rows behind.
        quick = settings.model_copy(update={"outbox_stale_seconds": 1.0, "outbox_relay_seconds": 0.1})
        engines = CrashingEngines(
            database_url=database_url,
            bus=bus,
            types=types,
            plan=crashes,
            settings=quick,
            constraints=constraints,
        )
        await engines.start()
    else:
        await engine.start()
    worker = WorkerService(
        bus=bus,
        deps=PluginRuntime(types=types, api_url=f"http://127.0.0.1:{api_port}"),
        concurrency=8,
        metrics=WorkerMetrics(CollectorRegistry()),
    )
    observer = ObserverService(
        bus=bus,
        runtime=PluginRuntime(types=types),
        concurrency=50,
        metrics=ObserverMetrics(CollectorRegistry()),
        policy=PollPolicy(first=0.02, factor=1.5, cap=0.2),
    )
    consuming = [*worker.consumptions(), *observer.consumptions()]
    if engines is None:
        consuming = [*engine.consumptions(), *consuming]
    subs = await start_consuming(bus, consuming)
    try:
        yield Converge(engine, world, pool, api_port, engines=engines)
    finally:
        abandon_resumable(consuming)
        if engines is not None:
            await engines.settle_crashes()
            await engines.stop_consuming()
        for sub in subs:
            await sub.stop()
        await supervisor.stop()
        if engines is not None:
            await engines.stop()
        await engine.stop()
        await bus.close()
        await pool.close()
