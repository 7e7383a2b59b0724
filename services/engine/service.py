"""The engine's long-running parts, independent of how the process hosts them.

`EngineService` registers this engine, keeps its heartbeat (other engines use
it to take over work of a dead one) and, as later issues add them, runs the
convergence consumers. `converge-engine serve` and `converge up` both host it.
"""

from __future__ import annotations

import asyncio
import os
import socket
import uuid

import structlog

from services.engine.store import Store
from shared.bus import Bus
from shared.errors import StoreUnavailable
from shared.tasks import Supervisor

log = structlog.get_logger(__name__)


class EngineService:
    def __init__(
        self,
        *,
        store: Store,
        bus: Bus,
        engine_id: uuid.UUID,
        supervisor: Supervisor,
        heartbeat_seconds: float = 2.0,
    ) -> None:
        self.store = store
        self.bus = bus
        self.engine_id = engine_id
        self._supervisor = supervisor
        self._heartbeat_seconds = heartbeat_seconds

    async def start(self) -> None:
        await self.store.register_engine(self.engine_id, hostname=socket.gethostname(), pid=os.getpid())
        self._supervisor.spawn("engine-heartbeat", self._heartbeat())

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self._heartbeat_seconds)
            try:
                await self.store.heartbeat(self.engine_id)
            except StoreUnavailable as exc:
                log.warning("heartbeat_failed", error=str(exc))

    async def stop(self) -> None:
        try:
            await self.store.unregister_engine(self.engine_id)
        except StoreUnavailable as exc:
            log.warning("unregister_failed", error=str(exc))
