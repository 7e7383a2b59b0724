"""Benchmark: how a `converge up` answers /healthz while hostile templates arrive, and
what the template pool costs a normal create.

For each abusive request of the 2026-11 security review (C2 ReDoS, C3a YAML
alias amplification, C3b str_replace, C3c repeat, C3d ResourceGroup count, H4
list_concat_unique), `SENDERS` clients send it again and again for `SECONDS`
while one client asks /healthz every 20 ms; the rows give /healthz's p50, p99
and max (target p99 < 100 ms), how many abusive requests were answered, their
statuses, and the server's peak memory (VmHWM). Then the pool's cost: the
median time the API takes to accept a small create, /healthz while a
10,000-resource create is accepted, and, in this process,
the round trip of `goals.load_goal` through a `TemplatePool` against the same
call inline, for templates of 10, 1,000 and 10,000 resources.

    python -m bench hostile
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import Counter
from typing import Any

import aiohttp

from bench.harness.options import Options, Row, row
from bench.harness.system import PROJECT, TOKEN, System, peak_rss_mib, running
from bench.preemption import percentile
from bench.template_parse import layered_template

SECONDS = 3.0
SENDERS = 2
HEALTHZ_TARGET_MS = 100.0
HOT = "heat_template_version: 2018-08-31\n"


def _alias_bomb() -> str:
    aliases = ", ".join(["*a"] * 2000)
    return (
        HOT
        + f"parameters: {{p: {{type: string, default: &a {'x' * 100_000}}}}}\n"
        + f"resources: {{v: {{type: OS::Heat::Value, properties: {{value: [{aliases}]}}}}}}\n"
    )


def _value(snippet: Any) -> dict[str, Any]:
    return {
        "heat_template_version": "2018-08-31",
        "resources": {"v": {"type": "OS::Heat::Value", "properties": {"value": snippet}}},
    }


def abusive_requests() -> list[tuple[str, str, str, dict[str, Any]]]:
    """(finding, method, path under /v1/<project>, body) of each reproduction."""
    redos = HOT + (
        'parameters:\n  p:\n    type: string\n    constraints:\n      - allowed_pattern: "(a+)+b"\n'
        "resources: {}\n"
    )
    numbers = list(range(150))
    fifteen_k = list(range(15_000))
    return [
        (
            "C2 ReDoS (5,000 a's) /validate",
            "POST",
            "/validate",
            {"template": redos, "parameters": {"p": "a" * 5000}},
        ),
        ("C3a YAML alias amplification /validate", "POST", "/validate", {"template": _alias_bomb()}),
        (
            "C3b str_replace 15k x 15k /stacks",
            "POST",
            "/stacks",
            {
                "stack_name": "replace",
                "template": _value(
                    {"str_replace": {"template": "a" * 15_000, "params": {"a": "b" * 15_000}}}
                ),
            },
        ),
        (
            "C3c repeat 150^3 /validate",
            "POST",
            "/validate",
            {
                "template": _value(
                    {"repeat": {"for_each": {"X": numbers, "Y": numbers, "Z": numbers}, "template": "X-Y-Z"}}
                )
            },
        ),
        (
            "C3d ResourceGroup count 1,000,000 /stacks",
            "POST",
            "/stacks",
            {
                "stack_name": "group",
                "template": {
                    "heat_template_version": "2018-08-31",
                    "resources": {
                        "g": {
                            "type": "OS::Heat::ResourceGroup",
                            "properties": {"count": 1_000_000, "resource_def": {"type": "OS::Heat::None"}},
                        }
                    },
                },
            },
        ),
        (
            "H4 list_concat_unique 15k /validate",
            "POST",
            "/validate",
            {"template": _value({"list_concat_unique": [fifteen_k, fifteen_k]})},
        ),
    ]


async def _healthz(session: aiohttp.ClientSession, base: str, stop: asyncio.Event) -> list[float]:
    latencies: list[float] = []
    while not stop.is_set():
        started = time.perf_counter()
        async with session.get(f"{base}/healthz") as response:
            await response.read()
        latencies.append(time.perf_counter() - started)
        await asyncio.sleep(0.02)
    return latencies


async def _abuse(
    system: System, method: str, path: str, body: dict[str, Any], stop: asyncio.Event
) -> Counter[int]:
    statuses: Counter[int] = Counter()
    headers = {"X-Auth-Token": TOKEN}
    while not stop.is_set():
        async with system.session.request(
            method, f"{system.api}{path}", json=body, headers=headers
        ) as response:
            await response.read()
            statuses[response.status] += 1
    return statuses


async def _under_abuse(
    system: System, finding: str, method: str, path: str, body: dict[str, Any]
) -> list[Row]:
    base = system.api.split("/v1/")[0]
    stop = asyncio.Event()
    async with aiohttp.ClientSession() as probe_session:
        probe = asyncio.create_task(_healthz(probe_session, base, stop))
        senders = [asyncio.create_task(_abuse(system, method, path, body, stop)) for _ in range(SENDERS)]
        await asyncio.sleep(SECONDS)
        stop.set()
        statuses: Counter[int] = Counter()
        for counted in await asyncio.gather(*senders):
            statuses.update(counted)
        latencies = [s * 1000 for s in await probe]
    p50, p99, worst = statistics.median(latencies), percentile(latencies, 99), max(latencies)
    note = f"{sum(statuses.values())} abusive requests answered ({dict(statuses)}); {len(latencies)} probes"
    return [
        row(f"{finding}: /healthz p50", round(p50, 1), "ms", mode="up", note=note),
        row(
            f"{finding}: /healthz p99",
            round(p99, 1),
            "ms",
            mode="up",
            target=f"< {HEALTHZ_TARGET_MS:.0f}",
            met=p99 < HEALTHZ_TARGET_MS,
            note=note,
        ),
        row(f"{finding}: /healthz max", round(worst, 1), "ms", mode="up", note=note),
    ]


async def _normal_creates(system: System, count: int = 20) -> Row:
    accepted = []
    template = layered_template(10)
    for i in range(count):
        _, seconds = await system.create(f"normal-{i}", template)
        accepted.append(seconds * 1000)
    return row(
        "normal create of 10 resources: API accepted, median",
        round(statistics.median(accepted), 1),
        "ms",
        mode="up",
        note=f"{count} creates; parse + validate in the template pool, store, first checks queued",
    )


async def _big_create(system: System, size: int = 10_000) -> list[Row]:
    """/healthz while a big (legitimate) template is accepted: parsed in the pool, its
    definition unpickled in the pool's thread, stored, first checks queued."""
    base = system.api.split("/v1/")[0]
    stop = asyncio.Event()
    async with aiohttp.ClientSession() as probe_session:
        probe = asyncio.create_task(_healthz(probe_session, base, stop))
        _, seconds = await system.create("big", layered_template(size))
        stop.set()
        latencies = [s * 1000 for s in await probe]
    note = f"API accepted in {seconds:.2f} s; {len(latencies)} probes"
    name = f"create of {size} resources"
    p99 = percentile(latencies, 99)
    return [
        row(
            f"{name}: /healthz p99",
            round(p99, 1),
            "ms",
            mode="up",
            target=f"< {HEALTHZ_TARGET_MS:.0f}",
            met=p99 < HEALTHZ_TARGET_MS,
            note=note,
        ),
        row(f"{name}: /healthz max", round(max(latencies), 1), "ms", mode="up", note=note),
    ]


async def _measure(options: Options) -> list[Row]:
    rows: list[Row] = []
    async with running("up", options) as system:
        for finding, method, path, body in abusive_requests():
            print(f"  {finding}", flush=True)
            rows += await _under_abuse(system, finding, method, path, body)
        rows.append(await _normal_creates(system))
        rows += await _big_create(system)
        up = next(s for s in system.services if s.name == "up")
        peak = peak_rss_mib(up.pid)
        rows.append(row("converge up peak RSS after all of it", peak, "MiB", mode="up", note="VmHWM"))
    return rows


async def _pool_overhead() -> list[Row]:
    from services.engine.goals import GoalSpec, load_goal
    from services.engine.template import StackIdentity, TemplateLimits
    from services.engine.template_pool import TemplatePool
    from shared.plugins.registry import load_types

    types = dict(load_types())
    identity = StackIdentity("bench", "00000000-0000-0000-0000-000000000000", PROJECT)
    limits = TemplateLimits(max_template_bytes=128 * 1024 * 1024)
    pool = TemplatePool(
        workers=2, timeout_seconds=120, memory_bytes=0, preload=sorted({c.__module__ for c in types.values()})
    )
    rows: list[Row] = []
    try:
        await pool.start()
        for size, repeat in ((10, 30), (1000, 10), (10_000, 3)):
            spec = GoalSpec(layered_template(size))
            inline, pooled = [], []
            for _ in range(repeat):
                started = time.perf_counter()
                load_goal(spec, identity, types, limits)
                inline.append(time.perf_counter() - started)
                started = time.perf_counter()
                await pool.run(load_goal, spec, identity, types, limits)
                pooled.append(time.perf_counter() - started)
            a, b = statistics.median(inline) * 1000, statistics.median(pooled) * 1000
            rows.append(
                row(
                    f"template pool round trip, {size} resources (pool - inline)",
                    round(b - a, 2),
                    "ms",
                    note=f"median of {repeat}: inline {a:.2f} ms, through the pool {b:.2f} ms "
                    "(arguments and the StackDefinition pickled both ways; the worker runs without "
                    "the cyclic collector, the result is unpickled with it paused)",
                )
            )
    finally:
        pool.close()
    return rows


def run(options: Options) -> list[Row]:
    async def both() -> list[Row]:
        return [*(await _measure(options)), *(await _pool_overhead())]

    return asyncio.run(both())


if __name__ == "__main__":
    from bench.harness.options import Options as _Options

    for r in run(_Options.from_environment()):
        print(f"{r['name']}: {r['value']} {r['unit']} {r.get('note', '')}")
