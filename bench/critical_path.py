"""Benchmark: critical-path efficiency of a layered DAG whose every action takes 1 s.

A 20 x 50 layered stack (bench/harness/templates.py, width 50) of
`OS::Heat::TestResource` with `action_wait_secs: {create: 1}`: the worker's
create returns IN_PROGRESS at once (the wait does not hold a worker slot or
block its event loop) and an observer finishes the job once the second has
passed. The ideal makespan is 20 layers x 1 s; the figure is the measured
create time divided by it (target <= 1.05).

The observer polls an in-progress resource with growing pauses (0.1 s,
x1.5; `services/observer/completion.py`), so the first observation after
the 1 s wait comes 1.33 s after the job started: that floor, 20 x 1.33 s,
is reported beside the figure so the engine's own share is visible.
"""

from __future__ import annotations

import asyncio

from bench.harness import templates
from bench.harness.options import Options, Row, row
from bench.harness.system import running

LAYERS = 20
WIDTH = 50
WAIT = 1.0  # seconds per action
TARGET = 1.05  # makespan / ideal
POLL = (0.1, 1.5)  # the observer's first pause and growth (services/observer/completion.py)


def poll_floor(wait: float) -> float:
    """When the observer first looks at a resource at or after `wait` seconds."""
    pause, factor = POLL
    elapsed = 0.0
    while elapsed < wait:
        elapsed += pause
        pause *= factor
    return elapsed


async def _measure(mode: str, options: Options) -> list[Row]:
    ideal = LAYERS * WAIT
    floor = LAYERS * poll_floor(WAIT)
    template = templates.layered(LAYERS * WIDTH, width=WIDTH, wait=WAIT)
    async with running(mode, options) as system:
        _, outcome = await system.create_and_wait("critical-path", template, timeout=ideal * 10)
    name = f"{LAYERS} x {WIDTH} layered create, {WAIT:.0f} s per action: makespan / ideal"
    if not outcome.ok:
        return [
            row(name, None, "x ideal", mode=mode, target=f"<= {TARGET}", met=False, note=outcome.reason[:160])
        ]
    ratio = outcome.seconds / ideal
    return [
        row(
            name,
            round(ratio, 3),
            "x ideal",
            mode=mode,
            target=f"<= {TARGET}",
            met=ratio <= TARGET,
            note=(
                f"makespan {outcome.seconds:.1f} s vs ideal {ideal:.0f} s; the observer's poll schedule "
                f"alone gives {floor:.1f} s ({floor / ideal:.2f} x)"
            ),
            seconds=round(outcome.seconds, 2),
            poll_floor_seconds=round(floor, 2),
        )
    ]


def run(options: Options) -> list[Row]:
    rows: list[Row] = []
    for mode in options.modes:
        print(f"  {mode} ...", flush=True)
        rows += asyncio.run(_measure(mode, options))
    return rows
