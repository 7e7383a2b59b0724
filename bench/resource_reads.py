"""Benchmark: reading the resources of a large stack through the API (list, a page, one).

A real `converge up` (scratch database on the PostgreSQL of the run) gets a stack of N
rows in layers of 100, each requiring two of the layer before, written straight into
its database (creating 100,000 resources through the engine is `throughput`'s job, and
takes minutes). Then, each a few times, over HTTP:

- `GET .../resources`: every resource, streamed a page at a time;
- `GET .../resources?limit=1000&marker=...`: one page from the middle (a Converge
  extension; Heat's list has no paging);
- `GET .../resources/<name>`: one resource with its `required_by`;
- `GET /healthz` meanwhile: the slowest answer while twelve lists run at once.

The targets: a page and a show in well under a second at 100k, the whole list linear
(per-resource cost flat from 1k to 100k). Reported, never asserted. Alone:

    .venv/bin/python -m tests.support.provide_services -- .venv/bin/python -m bench.resource_reads
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg

from bench.harness.options import Options, Row, row
from tests.support.databases import create_database, drop_database, layered_rows
from tests.support.hostile import ALPHA, start_server

WIDTH = 100
REPEATS = 3
CONCURRENT_LISTS = 12


def run(options: Options) -> list[Row]:
    rows: list[Row] = []
    for size in options.sizes:
        result = asyncio.run(measure(size, server=options.database_url))
        n = f"{size // 1000}k resources"
        per = result["list_seconds"] / size * 1e6
        rows += [
            row(
                f"resource list, whole ({n})",
                result["list_seconds"],
                "s",
                mode="up",
                note=f"{per:.1f} µs each",
            ),
            row(
                f"resource list, one page of 1000 ({n})",
                result["page_seconds"],
                "s",
                mode="up",
                target="< 1",
                met=result["page_seconds"] < 1,
            ),
            row(
                f"resource show ({n})",
                result["show_seconds"],
                "s",
                mode="up",
                target="< 1",
                met=result["show_seconds"] < 1,
            ),
            row(
                f"/healthz slowest during {CONCURRENT_LISTS} concurrent lists ({n})",
                result["healthz_slowest_ms"],
                "ms",
                mode="up",
                target="< 100",
                met=result["healthz_slowest_ms"] < 100,
            ),
        ]
    return rows


async def measure(size: int, *, server: str) -> dict[str, Any]:
    name = f"converge_bench_reads_{uuid.uuid4().hex[:8]}"
    url = await create_database(server, name)
    try:
        with tempfile.TemporaryDirectory() as data:
            async with start_server(Path(data), url) as up:
                path = await _large_stack(url, size)
                async with aiohttp.ClientSession(up.base, headers={"X-Auth-Token": ALPHA[0]}) as http:
                    return await _timings(http, path, size)
    finally:
        await drop_database(server, name)


async def _large_stack(url: str, size: int) -> str:
    """A stack of `size` rows of project alpha, written with SQL; its API path."""
    conn = await asyncpg.connect(url)
    try:
        stack_id = await layered_rows(conn, project="alpha", name="large", rows=size, width=WIDTH)
        await conn.execute("ANALYZE resources")
    finally:
        await conn.close()
    return f"/v1/alpha/stacks/large/{stack_id}"


async def _timed(http: aiohttp.ClientSession, path: str) -> tuple[float, bytes]:
    started = time.monotonic()
    async with http.get(path) as response:
        body = await response.read()
        assert response.status == 200, body[:200]
    return time.monotonic() - started, body


async def _timings(http: aiohttp.ClientSession, path: str, size: int) -> dict[str, Any]:
    middle = f"r{size // 2}"
    lists, pages, shows = [], [], []
    for _ in range(REPEATS):
        seconds, body = await _timed(http, f"{path}/resources")
        lists.append(seconds)
        pages.append((await _timed(http, f"{path}/resources?limit=1000&marker={middle}"))[0])
        shows.append((await _timed(http, f"{path}/resources/{middle}"))[0])
    assert len(json.loads(body)["resources"]) == size
    slowest = 0.0
    running = asyncio.gather(*(_timed(http, f"{path}/resources") for _ in range(CONCURRENT_LISTS)))
    while not running.done():
        slowest = max(slowest, (await _timed(http, "/healthz"))[0])
        await asyncio.sleep(0.02)
    await running
    return {
        "list_seconds": round(statistics.median(lists), 3),
        "page_seconds": round(statistics.median(pages), 4),
        "show_seconds": round(statistics.median(shows), 4),
        "healthz_slowest_ms": round(slowest * 1000, 1),
    }


def main() -> None:
    print(json.dumps(run(Options.from_environment()), indent=2))


if __name__ == "__main__":
    main()
