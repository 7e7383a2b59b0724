"""The engine's long-running parts, independent of how the process hosts them.

`EngineService` registers this engine and keeps its heartbeat, consumes the
`engine` queue (node checks and job results, see `checks`), relays outbox
messages left behind by a failed publish or a dead engine, and offers the
stack operations (`operations`). `converge-engine` and `converge up` both
host it.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping

import asyncpg
import structlog

from services.engine.api.deps import ApiDeps
from services.engine.checks import CODEC, Convergence
from services.engine.definitions import DefinitionCache
from services.engine.operations import Operations
from services.engine.outbox import Outbox
from services.engine.signals import Signals
from services.engine.store import Store
from services.engine.store.queries import Queries
from shared.bus import Bus
from shared.errors import ConflictError, StoreUnavailable
from shared.host import Consumption
from shared.plugins import ResourceType
from shared.protocol import ENGINE_QUEUE
from shared.tasks import Supervisor

log = structlog.get_logger(__name__)


class EngineService:
    def __init__(
        self,
        *,
        pool: asyncpg.Pool,
        bus: Bus,
        types: Mapping[str, type[ResourceType]],
        engine_id: uuid.UUID,
        supervisor: Supervisor,
        prefetch: int = 64,
        heartbeat_seconds: float = 2.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._clock = clock
        self.store = Store(pool)
        self.bus = bus
        self.engine_id = engine_id
        self.outbox = Outbox(pool=pool, bus=bus)
        self.types = types
        self.definitions = definitions = DefinitionCache(types=types)
        self.queries = Queries(pool)
        self.operations = Operations(
            store=self.store, outbox=self.outbox, definitions=definitions, types=types
        )
        self.convergence = Convergence(
            store=self.store, outbox=self.outbox, definitions=definitions, types=types
        )
        self._supervisor = supervisor
        self._prefetch = prefetch
        self._heartbeat_seconds = heartbeat_seconds

    def api(self) -> ApiDeps:
        """What the HTTP API needs from this engine."""
        return ApiDeps(
            operations=self.operations,
            queries=self.queries,
            store=self.store,
            definitions=self.definitions,
            types=self.types,
            signals=Signals(store=self.store, outbox=self.outbox),
        )

    def consumptions(self) -> list[Consumption]:
        return [Consumption(ENGINE_QUEUE, self.convergence.handle, prefetch=self._prefetch, codec=CODEC)]

    async def start(self) -> None:
        await self.store.register_engine(self.engine_id, hostname=socket.gethostname(), pid=os.getpid())
        self._supervisor.spawn("engine-heartbeat", self._heartbeat())
        self._supervisor.spawn("outbox-relay", self.outbox.relay_forever())
        self._supervisor.spawn("janitor", self._janitor())
        self._supervisor.spawn("timeouts", self._timeouts())

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self._heartbeat_seconds)
            try:
                await self.store.heartbeat(self.engine_id)
            except StoreUnavailable as exc:
                log.warning("heartbeat_failed", error=str(exc))

    async def _timeouts(self, *, every: float = 1.0) -> None:
        """Stacks never sit IN_PROGRESS past their timeout, message or no message."""
        while True:
            await asyncio.sleep(every)
            try:
                await self.convergence.expire_overdue(now=self._clock())
            except (StoreUnavailable, ConflictError) as exc:
                log.warning("timeout_scan_failed", error=str(exc))

    async def _janitor(self, *, every: float = 60.0) -> None:
        while True:
            await asyncio.sleep(every)
            try:
                traversals, inbox = await self.store.prune()
            except StoreUnavailable as exc:
                log.warning("prune_failed", error=str(exc))
                continue
            if traversals or inbox:
                log.info("pruned", traversals=traversals, inbox=inbox)

    async def stop(self) -> None:
        try:
            await self.store.unregister_engine(self.engine_id)
        except StoreUnavailable as exc:
            log.warning("unregister_failed", error=str(exc))
