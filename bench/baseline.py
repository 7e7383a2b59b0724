"""Benchmark: this checkout against a baseline checkout, measured in the same run.

Issue 18 asks the 10k layered create, distributed, to run at least 10x as fast as
fcd2258 did on the same machine. Machines (and the same machine from one hour to
the next) differ by 2x, so a ratio means something only when both versions ran in
the same run: each round starts a fresh system of this checkout and one of the
baseline's (its `.venv/bin`, as `bench.quick --against` does), alternating which
goes first (A B, B A), and both create, update and delete the same layered stack
(`usual_size`: 10,000, or the largest size asked if smaller). Each figure is the
median of its rounds; the row's value is this checkout's rate over the baseline's.

The baseline is a checkout with its own virtual environment, given as `--baseline
DIR` or `CONVERGE_BENCH_BASELINE` (e.g. `git worktree add ../base fcd2258 && make
-C ../base install`); without one the rows say how to give it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import statistics
from pathlib import Path
from typing import Any

from bench.__main__ import commit
from bench.harness.options import Options, Row, not_run, row, size_label, usual_size
from bench.quick import PHASES, Arm, measure

ROUNDS = 2
#: this checkout's 10k layered create, distributed, over the baseline's (issue 18)
TARGET_RATIO = 10.0


def _target(mode: str, phase: str) -> tuple[str, float | None]:
    """(target text, minimum ratio) of a row, or ("", None) when none applies."""
    if mode == "distributed" and phase == "create":
        return f">= {TARGET_RATIO:.0f}", TARGET_RATIO
    return "", None


def _name(phase: str, n: int) -> str:
    return f"{phase} layered {size_label(n)} against the baseline"


def ratio_rows(
    mode: str, n: int, ours: list[dict[str, Any]], theirs: list[dict[str, Any]], base: str
) -> list[Row]:
    """A row per phase: the median rate of `ours` over that of `theirs` (each a list of
    `bench.quick` figures, one per round), with both rates and the rounds in the note."""
    rows: list[Row] = []
    for phase in PHASES:
        a = [f[phase] for f in ours if f.get(phase)]
        b = [f[phase] for f in theirs if f.get(phase)]
        target, minimum = _target(mode, phase)
        name = _name(phase, n)
        if not a or not b:
            failed = [f[f"{phase} failed"] for f in ours + theirs if f.get(f"{phase} failed")]
            rows.append(
                not_run(
                    name,
                    f"the {phase} did not complete: {failed[0] if failed else 'no rate'}",
                    mode=mode,
                    unit="x baseline",
                    target=target,
                )
            )
            continue
        mine, baseline = statistics.median(a), statistics.median(b)
        ratio = mine / baseline
        runs = f"medians of {len(a)} and {len(b)} runs"
        rows.append(
            row(
                name,
                round(ratio, 2),
                "x baseline",
                mode=mode,
                target=target,
                met=None if minimum is None else ratio >= minimum,
                note=f"{mine:.0f} against {baseline:.0f} res/s ({base}), {runs}",
                rate=mine,
                baseline_rate=baseline,
            )
        )
    return rows


def run(options: Options) -> list[Row]:
    n = usual_size(options)
    if not options.baseline:
        reason = "no baseline checkout: --baseline DIR or CONVERGE_BENCH_BASELINE (with its .venv)"
        return [
            not_run(
                _name("create", n), reason, mode=mode, unit="x baseline", target=_target(mode, "create")[0]
            )
            for mode in options.modes
        ]
    here = Path(__file__).resolve().parent.parent
    arms = [Arm("A", here), Arm("B", Path(options.baseline).resolve())]
    base = commit(arms[1].checkout)
    rows: list[Row] = []
    for mode in options.modes:
        figures: dict[str, list[dict[str, Any]]] = {"A": [], "B": []}
        for r in range(ROUNDS):
            for arm in arms if r % 2 == 0 else arms[::-1]:
                print(
                    f"  {mode} round {r + 1} {'this checkout' if arm.name == 'A' else base} ...", flush=True
                )
                arm_options = dataclasses.replace(options, bin_dir=str(arm.bin_dir))
                figures[arm.name].append(asyncio.run(measure(mode, n, 0, 0.0, arm_options)))
        rows += ratio_rows(mode, n, figures["A"], figures["B"], base)
    return rows
