"""Benchmark: how fast the API answers while a 10,000-resource stack converges.

A layered stack of N `OS::Heat::TestResource` (default 10,000) is created;
while its create runs, one client asks, one request after another, for the
stack (`GET /stacks/{name}/{id}`) and for the first page of its resources
(`GET .../resources?limit=100`), each timed from the request to the end of
its body, until the create ends.

Reported per mode: p50 and p99 of each request kind (target p99 < 100 ms),
with the number of samples; the create's own rate for context.
"""

from __future__ import annotations

import asyncio
import statistics
import time

from bench.harness import templates
from bench.harness.options import Options, Row, each_mode, row, size_label
from bench.harness.system import Stack, System, running
from bench.preemption import percentile

TARGET_P99_MS = 100.0
PAGE = 100  # resources asked for per page


async def _sample(system: System, stack: Stack, ended: asyncio.Event) -> dict[str, list[float]]:
    """Time stack shows and resource pages, in turn, until `ended`."""
    paths = {
        "stack show": f"/stacks/{stack.name}/{stack.stack_id}",
        "resource list page": f"/stacks/{stack.name}/{stack.stack_id}/resources?limit={PAGE}",
    }
    times: dict[str, list[float]] = {kind: [] for kind in paths}
    while not ended.is_set():
        for kind, path in paths.items():
            started = time.perf_counter()
            await system.get(path)
            times[kind].append((time.perf_counter() - started) * 1000)
    return times


async def _measure(mode: str, n: int, options: Options) -> list[Row]:
    async with running(mode, options) as system:
        started = time.perf_counter()
        stack, accepted = await system.create("api-latency", templates.layered(n))
        ended = asyncio.Event()
        sampling = asyncio.create_task(_sample(system, stack, ended))
        limit = options.max_case_seconds
        outcome = await system.settled(stack, started=started, accepted=accepted, timeout=limit)
        ended.set()  # the samples of the poll's last ~50 ms are after the create
        times = await sampling
    label = size_label(n)
    rows: list[Row] = [
        row(
            f"{label} layered create while the API is asked",
            round(n / outcome.seconds, 1) if outcome.ok else None,
            "resources/s",
            mode=mode,
            note=f"{outcome.status}, {outcome.seconds:.1f} s",
        )
    ]
    for kind, values in times.items():
        if not values:
            rows.append(row(f"{kind} during a {label} create", None, "ms", mode=mode, note="no sample"))
            continue
        p99 = percentile(values, 99)
        note = f"{len(values)} samples"
        rows += [
            row(
                f"{kind} during a {label} create, p50",
                round(statistics.median(values), 1),
                "ms",
                mode=mode,
                note=note,
            ),
            row(
                f"{kind} during a {label} create, p99",
                round(p99, 1),
                "ms",
                mode=mode,
                target=f"< {TARGET_P99_MS:.0f}",
                met=p99 < TARGET_P99_MS,
                note=note,
            ),
        ]
    return rows


def run(options: Options) -> list[Row]:
    return each_mode(options, _measure)
