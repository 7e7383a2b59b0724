"""Benchmark: create and delete N no-op resources through the whole engine.

Mode "up": engine, worker and observer in one process on the in-process bus,
against the PostgreSQL at CONVERGE_BENCH_DATABASE_URL (default: the local
server; a scratch database is created and dropped). Shapes: independent
resources and a layered DAG (width 100, each resource depending on 2 of the
previous layer and reading an attribute of one).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
import uuid
from typing import Any

from prometheus_client import CollectorRegistry

from services.engine.operations import Goal
from services.engine.service import EngineService
from services.engine.store import connect
from services.engine.store.migrate import migrate
from services.engine.template import DEFAULT_LIMITS
from services.observer.service import ObserverMetrics, ObserverService
from services.worker.service import WorkerMetrics, WorkerService
from shared.bus.memory import MemoryBus
from shared.host import start_consuming
from shared.plugins.registry import load_types
from shared.plugins.runtime import PluginRuntime
from shared.tasks import Supervisor
from tests.support.databases import create_database, drop_database

SERVER = os.environ.get("CONVERGE_BENCH_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
SIZES = [int(n) for n in os.environ.get("CONVERGE_BENCH_SIZES", "1000,10000").split(",")]


def independent(n: int) -> dict[str, Any]:
    return {
        "heat_template_version": "2018-08-31",
        "resources": {f"r{i}": {"type": "OS::Heat::None"} for i in range(n)},
    }


def layered(n: int, width: int = 100) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    for i in range(n):
        layer, pos = divmod(i, width)
        props: dict[str, Any] = {"value": f"v{i}"}
        if layer:
            a, b = (layer - 1) * width + pos, (layer - 1) * width + (pos + 1) % width
            props = {"value": {"get_attr": [f"r{a}", "output"]}, "fail": False}
            resources[f"r{i}"] = {
                "type": "OS::Heat::TestResource",
                "properties": props,
                "depends_on": [f"r{b}"],
            }
        else:
            resources[f"r{i}"] = {"type": "OS::Heat::TestResource", "properties": props}
    return {"heat_template_version": "2018-08-31", "resources": resources}


async def _settle(pool: Any, stack_id: uuid.UUID) -> str:
    while True:
        status = await pool.fetchval("SELECT status FROM stacks WHERE stack_id = $1", stack_id)
        if status != "IN_PROGRESS":
            return str(status)
        await asyncio.sleep(0.05)


async def _measure(shape: str, n: int) -> list[dict[str, Any]]:
    name = f"converge_bench_{uuid.uuid4().hex[:8]}"
    url = await create_database(SERVER, name)
    pool = await connect(url, size=10)
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
        types = load_types()
        bus = MemoryBus()
        supervisor = Supervisor()
        limits = dataclasses.replace(DEFAULT_LIMITS, max_template_bytes=64 * 1024 * 1024)
        engine = EngineService(
            pool=pool, bus=bus, types=types, engine_id=uuid.uuid4(), supervisor=supervisor, limits=limits
        )
        await engine.start()
        runtime = PluginRuntime(types=types)
        worker = WorkerService(
            bus=bus, deps=runtime, concurrency=64, metrics=WorkerMetrics(CollectorRegistry())
        )
        observer = ObserverService(
            bus=bus, runtime=runtime, concurrency=64, metrics=ObserverMetrics(CollectorRegistry())
        )
        subs = await start_consuming(
            bus, [*engine.consumptions(), *worker.consumptions(), *observer.consumptions()]
        )
        template = independent(n) if shape == "independent" else layered(n)
        rows = []
        started = time.perf_counter()
        stack = await engine.operations.create(project_id="bench", name="b", goal=Goal(template))
        status = await _settle(pool, stack)
        created = time.perf_counter() - started
        rows.append(
            {
                "name": f"create {shape} {n} ({status})",
                "value": round(n / created, 1),
                "unit": "resources/s",
                "target": ">= 2000 (distributed)",
            }
        )
        started = time.perf_counter()
        await engine.operations.delete(stack)
        status = await _settle(pool, stack)
        deleted = time.perf_counter() - started
        rows.append(
            {
                "name": f"delete {shape} {n} ({status})",
                "value": round(n / deleted, 1),
                "unit": "resources/s",
                "target": "",
            }
        )
        for sub in subs:
            await sub.stop()
        await supervisor.stop()
        await engine.stop()
        return rows
    finally:
        await pool.close()
        await drop_database(SERVER, name)


def run() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for n in SIZES:
        for shape in ("independent", "layered"):
            rows.extend(asyncio.run(_measure(shape, n)))
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
