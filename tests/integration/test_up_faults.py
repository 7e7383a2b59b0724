"""Killing `converge up` at any moment loses nothing: SIGKILL or Ctrl-C at seeded random
moments during a create, an update with replacements and a delete of a 50-resource
stack; after each restart on the same data directory the operation ends COMPLETE with no
further call, both clouds hold exactly what the template says, nothing was created twice
and nothing was left behind.

Real: the `converge` executable (engine, worker, observer and sandbox cloud in one
process, in-process bus) on the test's PostgreSQL — seed 0 on its own embedded
PostgreSQL — with its sandbox state file, HTTP, SIGKILL and SIGINT. Half the stack is
Sandbox::Thing in that sandbox, half Converge::HTTP::Resource items of a REST API served
by the test process, which outlives every `converge up` (it honours Idempotency-Key, as
real APIs do); each resource refers to one of the other kind. Seeds:
CONVERGE_UP_FAULT_SEEDS (default 3; `make test-long` runs 20).
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.fake_rest_api import FakeApi, serve
from tests.support.up_client import Restarts, UpClient

pytestmark = pytest.mark.integration

SEEDS = int(os.environ.get("CONVERGE_UP_FAULT_SEEDS", "3"))
EMBEDDED_SEED = 0  # the one seed on the embedded PostgreSQL (slower to start)
WIDTH, LAYERS = 10, 5  # 50 resources
NAME = "faults"


def parent(i: int) -> int | None:
    """The resource `i` refers to: one of the other kind in the layer before."""
    if i < WIDTH:
        return None
    return i - WIDTH - 1 if i % WIDTH else i - WIDTH + 1


def sandboxed(i: int) -> bool:
    return i % 2 == 0


def version(i: int, generation: int) -> int:
    """Changing it replaces the resource: a third of them at generation 2."""
    return generation if i % 3 == 0 else 1


def template(api: FakeApi, generation: int) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    for i in range(WIDTH * LAYERS):
        up = parent(i)
        ref = {"get_resource": f"r{up}"} if up is not None else None
        if sandboxed(i):
            properties: dict[str, Any] = {
                "name": f"r{i}",
                "data": {"generation": generation, "parent": ref},
                "fixed": {"version": version(i, generation)},
                "build_seconds": 0.4,  # asynchronous: finished by the observer
            }
            resources[f"r{i}"] = {"type": "Sandbox::Thing", "properties": properties}
        else:
            body = {
                "_name": f"r{i}",
                "generation": generation,
                "parent": ref,
                "version": version(i, generation),
            }
            properties = {"url": f"{api.base}/things", "body": body, "replace_on_change": ["version"]}
            if i % 4 == 1:
                properties["status_field"] = "status"  # finished by the observer
            resources[f"r{i}"] = {"type": "Converge::HTTP::Resource", "properties": properties}
    return {"heat_template_version": "2018-08-31", "resources": resources}


def replaced_at_update() -> set[int]:
    return {i for i in range(WIDTH * LAYERS) if version(i, 2) != version(i, 1)}


async def check_world(up: UpClient, api: FakeApi, stack_id: str, generation: int) -> None:
    """Each template resource exists exactly once, as the template says, in its cloud;
    nothing else exists; nothing was created more often than the operations required."""
    ids = {r["resource_name"]: r["physical_resource_id"] for r in await up.resources(NAME, stack_id)}
    assert sorted(ids) == sorted(f"r{i}" for i in range(WIDTH * LAYERS))
    inventory = await up.sandbox.ok("GET", "/inventory")
    things = {t["name"]: t for t in inventory["resources"]}
    items = {item["_name"]: item for item in api.items.values()}
    assert sorted(things) == sorted(f"r{i}" for i in range(WIDTH * LAYERS) if sandboxed(i))
    assert len(inventory["resources"]) == len(things), "no thing twice"
    assert sorted(items) == sorted(f"r{i}" for i in range(WIDTH * LAYERS) if not sandboxed(i))
    assert len(api.items) == len(items), "no item twice"
    for i in range(WIDTH * LAYERS):
        name, up_id = f"r{i}", parent(i)
        expected_parent = ids[f"r{up_id}"] if up_id is not None else None
        if sandboxed(i):
            thing = things[name]
            assert thing["id"] == ids[name]
            assert thing["status"] == "ACTIVE", thing
            assert thing["data"] == {"generation": generation, "parent": expected_parent}
            assert thing["fixed"] == {"version": version(i, generation)}
        else:
            item = items[name]
            assert item["id"] == ids[name]
            assert (item["generation"], item["parent"]) == (generation, expected_parent)
            assert item["version"] == version(i, generation)
    replaced = replaced_at_update() if generation == 2 else set()
    expected_things = sum(1 + (i in replaced) for i in range(WIDTH * LAYERS) if sandboxed(i))
    assert inventory["created"] == expected_things, "a sandbox thing was created twice"
    creates = Counter(body["_name"] for body in api.bodies.values())
    expected = {f"r{i}": 1 + (i in replaced) for i in range(WIDTH * LAYERS) if not sandboxed(i)}
    assert dict(creates) == expected, "an item was created twice"


@pytest.fixture
async def api() -> AsyncIterator[FakeApi]:
    async with serve(FakeApi()) as running:
        yield running


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


class Chaos:
    """Stops `converge up` at seeded random moments of an operation and starts it again.
    A moment is a point of the operation's progress: after its k-th event."""

    def __init__(self, seed: int, restarts: Restarts) -> None:
        self.rng = random.Random(f"up-faults-{seed}")
        self.restarts = restarts
        self.up: UpClient | None = None
        self._events = 0  # events of the stack seen so far
        self._marker: str | None = None  # the last one
        self.stops: list[str] = []  # each stop: "<signal> after <n> events"

    async def start(self) -> UpClient:
        self.up = await self.restarts.start()
        return self.up

    async def interrupt(self, stack_id: str, *, events: int) -> str:
        """Stop `converge up` once or twice at random moments of the operation just
        started (the second maybe while it recovers from the first), starting it again
        each time; then wait for the operation to end, with no further call. Its state.
        `events`: about how many events the operation makes."""
        assert self.up is not None
        for _ in range(self.rng.choice([1, 1, 2])):
            await self._count(stack_id)
            if not await self._reached(stack_id, self._events + self.rng.randint(1, events)):
                break  # it ended first
            sig = self.rng.choice([signal.SIGKILL, signal.SIGKILL, signal.SIGINT])
            self.stops.append(f"{sig.name} after {self._events} events")
            await self.restarts.stop(sig)
            self.up = await self.restarts.start()
        state = await self.up.settled(NAME, stack_id, timeout=120)
        await self._count(stack_id)
        print(f"stops: {self.stops}; {self._events} events so far")  # shown when a seed fails
        return state

    async def _reached(self, stack_id: str, target: int) -> bool:
        """Wait (bounded) until the stack has `target` events (True), or its operation
        ended (False)."""
        assert self.up is not None
        async with asyncio.timeout(120):
            while True:
                await self._count(stack_id)
                if self._events >= target:
                    return True
                if not (await self.up.state(NAME, stack_id)).endswith("_IN_PROGRESS"):
                    return False
                await asyncio.sleep(0.02)

    async def _count(self, stack_id: str) -> None:
        assert self.up is not None
        path = f"/stacks/{NAME}/{stack_id}/events?limit=1000"
        status, data = await self.up.call("GET", path + (f"&marker={self._marker}" if self._marker else ""))
        if status == 404:
            return  # deleted
        assert status == 200, data
        events = data["events"]
        if events:
            self._events += len(events)
            self._marker = events[-1]["id"]


@pytest.mark.timeout(420)
@pytest.mark.parametrize("seed", range(SEEDS))
async def test_killing_converge_up_at_random_moments_loses_nothing(
    seed: int, tmp_path: Path, database_url: str, api: FakeApi, http: aiohttp.ClientSession
) -> None:
    env = {
        "CONVERGE_HTTP_ALLOWED_HOSTS": f"127.0.0.1:{api.port}",
        "CONVERGE_DRAIN_SECONDS": "5",
    }
    restarts = Restarts(tmp_path, None if seed == EMBEDDED_SEED else database_url, http, env=env)
    chaos = Chaos(seed, restarts)
    try:
        up = await chaos.start()
        stack_id = await up.create(NAME, template(api, 1))
        assert await chaos.interrupt(stack_id, events=100) == "CREATE_COMPLETE"
        assert chaos.up is not None
        await check_world(chaos.up, api, stack_id, 1)

        await chaos.up.update(NAME, stack_id, template(api, 2))
        assert await chaos.interrupt(stack_id, events=170) == "UPDATE_COMPLETE"
        await check_world(chaos.up, api, stack_id, 2)

        await chaos.up.delete(NAME, stack_id)
        assert await chaos.interrupt(stack_id, events=100) == "DELETE_COMPLETE"
        assert await chaos.up.sandbox.inventory() == []
        assert api.items == {}, "nothing left behind"
        assert chaos.stops, "converge up was stopped at least once"
    finally:
        await restarts.close()
    if seed == EMBEDDED_SEED:
        assert not (tmp_path / "postgres" / "postmaster.pid").exists(), "the embedded PostgreSQL stopped"
