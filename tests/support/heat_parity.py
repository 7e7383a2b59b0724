"""What the Heat parity tests (`tests/integration/test_heat_parity_*.py`) share: a Converge
(`tests.support.convergence.converge`, real PostgreSQL, deterministic delivery) served over real
HTTP, with Heat's own clients pointed at it — python-heatclient and the `openstack` CLI — as
project p1 with token t1. Each test file subclasses `HeatClients` with the steps it needs."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from services.engine.core.model import StackId
from tests.support.convergence import Converge, converge
from tests.support.openstack_cli import OpenStack

TOKENS = "t1=p1"


@dataclass
class HeatClients:
    cv: Converge
    base: str  # the API's URL
    hc: Any  # heatclient's v1 client, project p1
    cli: OpenStack  # the `openstack` CLI, project p1
    home: Path  # the test's own directory (files for the CLI, the CLI's home)

    async def run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """A heatclient call (blocking) off the event loop."""
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def settled(self, stack_id: str) -> Any:
        """The stack as heatclient shows it, once its operation has ended."""
        await self.cv.settled(StackId(uuid.UUID(stack_id)), timeout=60)
        return await self.run(self.hc.stacks.get, stack_id)

    def values(self) -> list[str]:
        """The `value` property of every live resource in the test's cloud, sorted."""
        return sorted(str(r.properties.get("value")) for r in self.cv.world.live.values())


H = TypeVar("H", bound=HeatClients)


@asynccontextmanager
async def serving(
    clients: type[H], database_url: str, home: Path, *, tokens: str = TOKENS, **options: Any
) -> AsyncIterator[H]:
    """Converge on `database_url` (`options` go to `converge`), and Heat's clients on it."""
    from heatclient import client as heatclient

    async with converge(database_url, seed=0, duplicate_rate=0.0, **options) as cv, cv.http(tokens) as base:
        hc = heatclient.Client("1", endpoint=f"{base}/v1/p1", token="t1")
        yield clients(cv, base, hc, OpenStack(f"{base}/v1/p1", "t1", home), home)
