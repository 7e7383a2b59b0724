"""The scenario harness over RabbitMQ, with every service as its own process.

2 engines, 2 workers and an observer run as processes against PostgreSQL
and RabbitMQ. Scenario templates are written with `Test::Thing` (an
in-process type); here each becomes a `Converge::HTTP::Resource` on a REST
API in the test process, whose items are the real world (`HttpWorld`):
`value`/`ref`/`fail` go in the body, a change of `size` forces replacement,
and `get_attr: [thing, attr]` reads `body.attr`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import asyncpg

from services.engine.convergence import Convergence
from services.engine.core.model import StackId
from services.engine.goals import Goal
from services.engine.operations import Operations
from tests.support.fake_rest_api import FakeApi
from tests.support.waiting import stack_settled
from tests.support.world import Real

THING = "Test::Thing"
_META = ("id", "status", "_name", "_stack")


@dataclass
class HttpWorld:
    api: FakeApi
    tag: str

    @property
    def live(self) -> dict[str, Any]:
        return {i: item for i, item in self.api.items.items() if item.get("_stack") == self.tag}

    @property
    def created(self) -> int:
        return sum(1 for i in self.api.created if self._tag_of(i) == self.tag)

    def _tag_of(self, item_id: str) -> str | None:
        for seen in self.api.seen:
            if seen.method == "POST" and isinstance(seen.body, dict):
                key = seen.headers.get("Idempotency-Key")
                if key is not None and self.api.by_key.get(key) == item_id:
                    return str(seen.body.get("_stack"))
        return None

    def by_name(self) -> dict[str, list[Real]]:
        out: dict[str, list[Real]] = {}
        for item_id, item in self.live.items():
            props = {k: v for k, v in item.items() if k not in _META}
            out.setdefault(item["_name"], []).append(Real(item_id, item["_name"], props))
        return out


def _rewrite(value: Any, things: frozenset[str]) -> Any:
    if isinstance(value, dict):
        if set(value) == {"get_attr"} and isinstance(value["get_attr"], list):
            path = value["get_attr"]
            if len(path) >= 2 and path[0] in things and path[1] != "id":
                return {"get_attr": [path[0], "body", *path[1:]]}
        return {k: _rewrite(v, things) for k, v in value.items()}
    if isinstance(value, list):
        return [_rewrite(v, things) for v in value]
    return value


def to_http(template: Mapping[str, Any], *, url: str, tag: str) -> dict[str, Any]:
    resources = template.get("resources", {})
    things = frozenset(n for n, r in resources.items() if r.get("type") == THING)
    out: dict[str, Any] = {}
    for name, resource in resources.items():
        rewritten = _rewrite(dict(resource), things)
        if name in things:
            body = {**rewritten.get("properties", {}), "_name": name, "_stack": tag}
            rewritten["type"] = "Converge::HTTP::Resource"
            rewritten["properties"] = {"url": url, "body": body, "replace_on_change": ["size"]}
        out[name] = rewritten
    return {**_rewrite(dict(template), things), "resources": out}


@dataclass
class DistributedConverge:
    operations: Operations
    convergence: Convergence
    pool: asyncpg.Pool
    api: FakeApi
    tag: str
    project: str = "p1"

    @property
    def world(self) -> HttpWorld:
        return HttpWorld(self.api, self.tag)

    def _goal(self, template: Mapping[str, Any], params: Mapping[str, Any]) -> Goal:
        return Goal(to_http(template, url=f"{self.api.base}/things", tag=self.tag), parameters=params)

    async def create(
        self,
        name: str,
        template: Mapping[str, Any],
        *,
        rollback: bool = False,
        timeout_mins: int | None = None,
        **params: Any,
    ) -> StackId:
        return await self.operations.create(
            project_id=self.project,
            name=f"{self.tag}-{name}",
            goal=self._goal(template, params),
            disable_rollback=not rollback,
            timeout_mins=timeout_mins,
        )

    async def time_passes(self, seconds: float) -> None:
        """Let a timeout scheduler (this test's own engine core) see the clock `seconds` ahead."""
        await self.convergence.expire_overdue(now=time.time() + seconds)

    async def cancel(self, stack_id: uuid.UUID, *, rollback: bool) -> None:
        await self.operations.cancel(StackId(stack_id), rollback=rollback)

    async def update(self, stack_id: uuid.UUID, template: Mapping[str, Any], **params: Any) -> None:
        await self.operations.update(StackId(stack_id), self._goal(template, params))

    async def delete(self, stack_id: uuid.UUID) -> None:
        await self.operations.delete(StackId(stack_id))

    async def settled(self, stack_id: uuid.UUID, *, timeout: float = 60) -> tuple[str, str, str]:
        return await stack_settled(self.pool, stack_id, timeout=timeout)

    async def state(self, stack_id: uuid.UUID) -> tuple[str, str]:
        row = await self.pool.fetchrow("SELECT action, status FROM stacks WHERE stack_id = $1", stack_id)
        assert row is not None
        return row["action"], row["status"]

    async def rows(self, stack_id: uuid.UUID) -> list[asyncpg.Record]:
        return list(await self.pool.fetch("SELECT * FROM resources WHERE stack_id = $1", stack_id))

    async def events(self, stack_id: uuid.UUID) -> list[asyncpg.Record]:
        return list(
            await self.pool.fetch("SELECT * FROM events WHERE stack_id = $1 ORDER BY event_seq", stack_id)
        )
