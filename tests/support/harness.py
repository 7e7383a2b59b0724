"""What a scenario needs from a running Converge, whatever runs it.

`Harness` is met by the in-process Converge (tests/support/convergence.py)
and by the distributed one (tests/support/distributed.py); `WorldView` is
the real world a scenario checks: which real resources exist, by name, with
what properties.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import asyncpg

from services.engine.core.model import StackId
from tests.support.world import Real


class WorldView(Protocol):
    @property
    def live(self) -> Mapping[str, Any]: ...

    @property
    def created(self) -> int: ...

    def by_name(self) -> dict[str, list[Real]]: ...


class Harness(Protocol):
    @property
    def world(self) -> WorldView: ...

    async def create(
        self,
        name: str,
        template: Mapping[str, Any],
        *,
        rollback: bool = False,
        timeout_mins: int | None = None,
        **params: Any,
    ) -> StackId: ...

    async def time_passes(self, seconds: float) -> None: ...

    async def cancel(self, stack_id: StackId, *, rollback: bool) -> None: ...

    async def update(self, stack_id: StackId, template: Mapping[str, Any], **params: Any) -> None: ...

    async def delete(self, stack_id: StackId) -> None: ...

    async def settled(self, stack_id: StackId, *, timeout: float = 30) -> tuple[str, str, str]: ...

    async def state(self, stack_id: StackId) -> tuple[str, str]: ...

    async def rows(self, stack_id: StackId) -> list[asyncpg.Record]: ...

    async def events(self, stack_id: StackId) -> list[asyncpg.Record]: ...
