"""`make bench-quick`: the figures every change reports, in under two minutes.

In each mode (`converge up`; distributed: 2 engines, 2 workers, 1 observer
over RabbitMQ) one fresh system creates, updates (every resource changes)
and deletes a 2,000-resource layered stack (bench/harness/templates.py), each
phase timed from the request until the stack is no longer IN_PROGRESS and
its CPU time counted per resource (the services' processes with their
template pools; "all" adds every PostgreSQL and RabbitMQ process:
bench/harness/cpu.py), which says where the cost went, and the statements
the engines sent PostgreSQL per resource (their `/metrics`), a count the
machine's speed hardly moves; before each system
starts, a plain Python loop is timed ("machine loop", bench/harness/speed.py),
a yardstick of the machine beside the figures of the code; then,
on the same system, `repeats` updates each preempt a running create of the
same stack shape, timed from the request to the new traversal's first check
("preempt") and to the request's answer ("accepted": its commit moved the
stack's traversal, after which no job of the old one is issued)
(bench/preemption.py). The figures are printed beside the last committed
quick result (`git show HEAD:bench/results/quick-latest.json`, or
`--previous FILE`) with their ratio, and written to `quick-latest.json` in
the results directory; commit that file with the change, so the next
change is compared against it.

The machine is shared and noisy, so a ratio against a file measured another
day says little on its own. To compare two versions, measure both in the same
run: `--against CHECKOUT` runs the services of another checkout (its
`.venv/bin`) as arm B, and `--env-b KEY=VALUE` gives arm B's services extra
environment (e.g. `CONVERGE_EVENT_LOOP=asyncio`); the arms alternate
(A B, B A, ...) for `--rounds` rounds, each figure is the median of its
rounds, and the ratio printed is B / A. An A/B run is written to
`quick-ab-<timestamp>.json` and leaves `quick-latest.json` alone.

    python -m bench.quick [--size 2000] [--repeats 5] [--modes up,distributed]
                          [--previous FILE] [--results DIR]
                          [--against CHECKOUT] [--env-a K=V] [--env-b K=V] [--rounds 2]

Not a module of `make bench` (it has no `run`); nothing here is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.__main__ import RESULTS, commit, load_average, machine
from bench.harness import templates
from bench.harness.cpu import CpuUse, spent
from bench.harness.options import Options, parse_modes
from bench.harness.speed import loop_seconds
from bench.harness.system import running
from bench.preemption import percentile, samples
from shared.logging import configure_logging

LATEST = "quick-latest.json"
PHASES = ("create", "update", "delete")
#: Seconds between a create and the first update preempting it, and between updates.
GAP = 0.5
#: The figures and whether a larger value is better.
HIGHER_IS_BETTER = {
    "create": True,
    "update": True,
    "delete": True,
    **{f"{phase} CPU, {whose}": False for phase in PHASES for whose in ("services", "all")},
    **{f"{phase} statements": False for phase in PHASES},
    "preempt p50": False,
    "preempt p99": False,
    "accepted p50": False,
    "accepted p99": False,
    "machine loop": False,
}
UNITS = {
    "create": "res/s",
    "update": "res/s",
    "delete": "res/s",
    **{f"{phase} CPU, {whose}": "ms/res" for phase in PHASES for whose in ("services", "all")},
    **{f"{phase} statements": "per res" for phase in PHASES},
    "preempt p50": "ms",
    "preempt p99": "ms",
    "accepted p50": "ms",
    "accepted p99": "ms",
    "machine loop": "s for 10^7 additions",
}


@dataclass
class Arm:
    """One version under measurement: a checkout's console scripts and extra environment."""

    name: str
    checkout: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def bin_dir(self) -> Path:
        return self.checkout / ".venv" / "bin"

    def describe(self) -> dict[str, Any]:
        return {"checkout": str(self.checkout), "commit": commit(self.checkout), "env": self.env}


def _env_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, not {text!r}")
    return key, value


async def measure(mode: str, n: int, repeats: int, wait: float, options: Options) -> dict[str, Any]:
    """One system in `mode`: the three phases' rates, then the preemption samples; and
    first, how fast the machine runs plain Python (`harness.speed`), a yardstick for the
    rest (not a figure of the code)."""
    figures: dict[str, Any] = {"machine loop": loop_seconds()}
    async with running(mode, options) as system:
        before, sent = await system.cpu_use(), await system.db_statements()
        stack, created = await system.create_and_wait(
            "quick", templates.layered(n), timeout=options.phase_timeout
        )
        figures.update(_cpu_figures("create", n, before, await system.cpu_use()))
        figures["create statements"] = _per_resource(sent, await system.db_statements(), n)
        outcomes = {"create": created}
        if created.ok:
            for phase, template in (("update", templates.layered(n, generation=2)), ("delete", None)):
                before, sent = await system.cpu_use(), await system.db_statements()
                outcomes[phase] = await system.run(phase, stack, template, timeout=options.phase_timeout)
                figures.update(_cpu_figures(phase, n, before, await system.cpu_use()))
                figures[f"{phase} statements"] = _per_resource(sent, await system.db_statements(), n)
        for phase in PHASES:
            outcome = outcomes.get(phase)
            ok = outcome is not None and outcome.ok
            figures[phase] = round(n / outcome.seconds, 1) if outcome is not None and ok else None
            if outcome is not None and not ok:
                figures[f"{phase} failed"] = f"{outcome.status}: {outcome.reason[:200]}"
        if repeats:
            latencies, accepts, missed = await samples(system, n, repeats, gap=GAP, wait=wait)
            figures["preempt p50"] = round(percentile(latencies, 50), 1) if latencies else None
            figures["preempt p99"] = round(percentile(latencies, 99), 1) if latencies else None
            # The request's answer: its commit moved the stack's traversal (the preemption itself).
            figures["accepted p50"] = round(percentile(accepts, 50), 1) if accepts else None
            figures["accepted p99"] = round(percentile(accepts, 99), 1) if accepts else None
            figures["preempt samples"] = [round(v, 1) for v in latencies]
            figures["preempt missed"] = missed
    return figures


def _cpu_figures(phase: str, n: int, before: CpuUse, after: CpuUse) -> dict[str, float]:
    """CPU milliseconds per resource the phase cost: the services' own (with their
    template pools), and all of it (with every PostgreSQL and RabbitMQ process, so
    other work on the machine too; `harness.cpu`)."""
    used = spent(before, after)
    services = sum(used.get(name, 0.0) for name in after.services)
    return {
        f"{phase} CPU, services": round(1000 * services / n, 3),
        f"{phase} CPU, all": round(1000 * sum(used.values()) / n, 3),
    }


def _per_resource(before: float | None, after: float | None, n: int) -> float | None:
    """Statements the engines sent PostgreSQL during a phase, per resource (None for a
    checkout whose engines do not count them)."""
    return None if before is None or after is None else round((after - before) / n, 3)


def _median(values: list[Any]) -> float | None:
    numbers = [v for v in values if isinstance(v, int | float)]
    return round(statistics.median(numbers), 3) if numbers else None


def _ratio(now: float | None, before: float | None) -> str:
    if not now or not before:
        return "—"
    return f"{now / before:.2f}x"


def _shown(value: Any) -> str:
    return "—" if value is None else f"{value:g}"


def _verdict(name: str, now: float | None, before: float | None) -> str:
    if not now or not before:
        return ""
    if name == "machine loop":  # the yardstick: what the machine did, not the code
        return "machine faster" if now < before else "machine slower"
    better = (now > before) == HIGHER_IS_BETTER[name]
    return "better" if better else "worse"


def table(title_a: str, title_b: str, a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]) -> str:
    """Figures of `b` beside those of `a`, by mode, with the ratio b / a."""
    lines = [
        f"| mode | figure | {title_a} | {title_b} | ratio | |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for mode in dict.fromkeys([*a, *b]):
        for name in HIGHER_IS_BETTER:
            before, now = a.get(mode, {}).get(name), b.get(mode, {}).get(name)
            if before is None and now is None:
                continue
            lines.append(
                f"| {mode} | {name} ({UNITS[name]}) | {_shown(before)} | {_shown(now)} "
                f"| {_ratio(now, before)} | {_verdict(name, now, before)} |"
            )
    return "\n".join(lines)


def previous(path: str | None) -> dict[str, Any] | None:
    """The last committed quick result (or the file given); None when there is none."""
    if path:
        return dict(json.loads(Path(path).read_text()))
    try:
        shown = subprocess.run(
            ["git", "show", f"HEAD:bench/results/{LATEST}"],
            capture_output=True,
            text=True,
            check=True,
            cwd=RESULTS.parent.parent,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return dict(json.loads(shown.stdout))


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.quick", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=2000, help="resources in the layered stack")
    parser.add_argument("--repeats", type=int, default=5, help="preemption samples per mode (0: none)")
    parser.add_argument("--wait", type=float, default=0.0, help="seconds each preempted create takes")
    parser.add_argument("--modes", type=parse_modes, default=("up", "distributed"))
    parser.add_argument("--previous", help=f"compare with this file (default: the committed {LATEST})")
    parser.add_argument("--results", help="output directory (default bench/results)")
    parser.add_argument("--against", type=Path, help="arm B: another checkout (with its .venv)")
    parser.add_argument("--env-a", type=_env_pair, action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--env-b", type=_env_pair, action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--rounds", type=int, help="A/B rounds (default 2 for an A/B run, else 1)")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    configure_logging(level=os.environ.get("CONVERGE_LOG_LEVEL", "warning"), fmt="json")
    here = Path(__file__).resolve().parent.parent
    ab = args.against is not None or bool(args.env_b)
    arms = [Arm("A", here, dict(args.env_a))]
    if ab:
        arms.append(Arm("B", (args.against or here).resolve(), dict(args.env_b)))
    rounds = args.rounds or (2 if ab else 1)
    base = Options.from_environment(modes=args.modes)
    results = Path(args.results or base.results or RESULTS)
    started_at = time.perf_counter()
    report: dict[str, Any] = {
        "started": dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ"),
        "commit": commit(),
        "machine": machine(),
        "size": args.size,
        "repeats": args.repeats,
        "modes": list(args.modes),
        "arms": {arm.name: arm.describe() for arm in arms},
        "rounds": [],
    }
    for r in range(rounds):
        order = arms if r % 2 == 0 else arms[::-1]
        for arm in order:
            options = dataclasses.replace(base, bin_dir=str(arm.bin_dir), service_env=arm.env)
            for mode in args.modes:
                print(f"round {r + 1} arm {arm.name} {mode} ...", flush=True)
                figures = asyncio.run(measure(mode, args.size, args.repeats, args.wait, options))
                print("  " + json.dumps({k: v for k, v in figures.items() if k != "preempt samples"}))
                report["rounds"].append({"round": r + 1, "arm": arm.name, "mode": mode, **figures})
    medians: dict[str, dict[str, dict[str, Any]]] = {}
    for arm in arms:
        for mode in args.modes:
            runs = [x for x in report["rounds"] if x["arm"] == arm.name and x["mode"] == mode]
            medians.setdefault(arm.name, {})[mode] = {
                name: _median([x.get(name) for x in runs]) for name in HIGHER_IS_BETTER
            }
    report["figures"] = medians
    report["seconds"] = round(time.perf_counter() - started_at, 1)
    results.mkdir(parents=True, exist_ok=True)
    if ab:
        describe = report["arms"]
        title_a = f"A {describe['A']['commit']} {' '.join(f'{k}={v}' for k, v in arms[0].env.items())}"
        title_b = f"B {describe['B']['commit']} {' '.join(f'{k}={v}' for k, v in arms[1].env.items())}"
        print(f"\nA/B in the same run, {rounds} rounds alternating (medians); ratio = B / A:\n")
        print(table(title_a.strip(), title_b.strip(), medians["A"], medians["B"]))
        out = results / f"quick-ab-{report['started']}.json"
    else:
        before = previous(args.previous)
        if before is None:
            print("\nno committed quick result to compare with (bench/results/quick-latest.json)\n")
            print(table("previous", f"now {report['commit']}", {}, medians["A"]))
        else:
            title = f"previous {before.get('commit', '?')} ({before.get('started', '?')})"
            print("\nagainst the last committed quick result; ratio = now / previous:\n")
            print(table(title, f"now {report['commit']}", before["figures"]["A"], medians["A"]))
            print("\n(a ratio between two runs on different days mostly measures the machine, as")
            print(" its machine loop row suggests; for a real comparison:")
            print(" python -m bench.quick --against <other checkout>)")
        out = results / LATEST
    out.write_text(json.dumps(report, indent=2) + "\n")
    load = " ".join(load_average())
    print(f"\n{report['seconds']} s; load average now {load}; wrote {out}")
    failed = any(isinstance(k, str) and k.endswith("failed") for x in report["rounds"] for k in x)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
