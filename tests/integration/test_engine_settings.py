"""A setting reaches the engine whichever way it runs: `converge up`, a `converge-engine`
process beside others, and the in-process harness the tests build (issue 22, item 1).

Real: the `converge` and `converge-engine` console scripts as processes (PostgreSQL,
and RabbitMQ for the separate engine) and the in-process harness on PostgreSQL (with
one engine, and with crashing engines replaced as they crash), each driven over real
HTTP. Each runs with a stack quota of one and a janitor period nobody
would choose; the second create of a project is refused naming the quota's setting,
and the engine reports the period it was given (its `engine_tuning` start-up event, or
the harness's engine itself).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.convergence import converge
from tests.support.crashes import CrashPlan
from tests.support.engine_settings import engine_settings
from tests.support.hostile import start_server
from tests.support.ports import free_port
from tests.support.processes import ServiceProcess

pytestmark = pytest.mark.integration

PRUNE_SECONDS = 7.5  # CONVERGE_PRUNE_SECONDS: far from the default, harmless to run with
QUOTA = {"CONVERGE_MAX_STACKS_PER_PROJECT": "1", "CONVERGE_PRUNE_SECONDS": str(PRUNE_SECONDS)}
REFUSAL = "quota exceeded: at most 1 stacks per project (CONVERGE_MAX_STACKS_PER_PROJECT)"


@dataclass
class Running:
    """An engine serving the API at `base` for `token` (project `project`); `tuning()` is
    what the engine says it runs with."""

    base: str
    token: str
    project: str
    tuning: Callable[[], Any]


@contextlib.asynccontextmanager
async def up_process(tmp_path: Path, database_url: str, **_: Any) -> AsyncIterator[Running]:
    async with start_server(tmp_path, database_url, env=QUOTA) as server:
        event = await server.process.wait_for_event("engine_tuning")
        yield Running(server.base, "ta", "alpha", lambda: event["prune_seconds"])


@contextlib.asynccontextmanager
async def engine_process(
    tmp_path: Path, database_url: str, *, amqp_url: str, queue_prefix: str
) -> AsyncIterator[Running]:
    port = free_port()
    env = {
        "CONVERGE_DATABASE_URL": database_url,
        "CONVERGE_AMQP_URL": amqp_url,
        "CONVERGE_QUEUE_PREFIX": queue_prefix,
        "CONVERGE_API_PORT": str(port),
        "CONVERGE_API_TOKENS": "t1=p1",
        **QUOTA,
    }
    engine = await ServiceProcess(["converge-engine"], env).start()
    try:
        await engine.wait_for_event("ready", timeout=90)
        event = await engine.wait_for_event("engine_tuning")
        yield Running(f"http://127.0.0.1:{port}", "t1", "p1", lambda: event["prune_seconds"])
    finally:
        await engine.stop()


@contextlib.asynccontextmanager
async def in_process(tmp_path: Path, database_url: str, **_: Any) -> AsyncIterator[Running]:
    settings = engine_settings(max_stacks_per_project=1, prune_seconds=PRUNE_SECONDS)
    async with (
        converge(database_url, seed=0, duplicate_rate=0.0, settings=settings) as cv,
        cv.http("t1=p1") as base,
    ):
        yield Running(base, "t1", "p1", lambda: cv.engine.tuning.prune_seconds)


@contextlib.asynccontextmanager
async def crash_harness(tmp_path: Path, database_url: str, **_: Any) -> AsyncIterator[Running]:
    """The in-process harness with engines that crash and are replaced (tests/support/crashes.py)."""
    settings = engine_settings(max_stacks_per_project=1, prune_seconds=PRUNE_SECONDS)
    plan = CrashPlan("settings")
    async with (
        converge(database_url, seed=0, duplicate_rate=0.0, crashes=plan, settings=settings) as cv,
        cv.http("t1=p1") as base,
    ):

        def tuning() -> Any:
            assert cv.engines is not None
            seen = {node.service.tuning.prune_seconds for node in cv.engines.nodes if node.service}
            return seen.pop() if len(seen) == 1 else seen

        yield Running(base, "t1", "p1", tuning)


MODES = {
    "converge up": up_process,
    "converge-engine": engine_process,
    "in-process harness": in_process,
    "crash harness": crash_harness,
}


async def create(http: aiohttp.ClientSession, running: Running, name: str) -> tuple[int, Any]:
    template = {"heat_template_version": "2016-10-14", "resources": {"r": {"type": "OS::Heat::None"}}}
    async with http.post(
        f"{running.base}/v1/{running.project}/stacks",
        json={"stack_name": name, "template": template},
        headers={"X-Auth-Token": running.token},
    ) as response:
        return response.status, await response.json()


@pytest.mark.timeout(240)
@pytest.mark.parametrize("mode", list(MODES))
async def test_the_stack_quota_and_the_engines_tuning_reach_the_engine_in_every_mode(
    mode: str, tmp_path: Path, database_url: str, amqp_url: str, queue_prefix: str
) -> None:
    running_in = MODES[mode]
    async with (
        running_in(tmp_path, database_url, amqp_url=amqp_url, queue_prefix=queue_prefix) as running,
        aiohttp.ClientSession() as http,
    ):
        assert running.tuning() == PRUNE_SECONDS
        status, body = await create(http, running, "first")
        assert status == 201, body
        status, body = await create(http, running, "second")
        assert status == 400, body
        assert body["error"]["message"] == REFUSAL
