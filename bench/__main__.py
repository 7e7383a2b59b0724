"""`make bench`: run the benchmark modules and record the results.

Writes `bench/results/<timestamp>.json` and `.md` after each module, so an
interrupted run still leaves what it measured; a run of every module writes
`latest.*` too (a run of some modules leaves the last full run's alone). Each
run records the machine, the commit, the modes and the options; every figure
sits beside its target. Targets are goals, reported, never asserted.

    python -m bench [module ...] [--sizes 1000,10000] [--modes up,distributed]
                    [--shapes independent,chain,layered] [--repeats 20] [--full]
                    [--baseline CHECKOUT]

Modules are the `*.py` files in bench/ that define a `run` function (default:
all of them, in ORDER); a file with only a `main` (a standalone tool) is not a
benchmark and is left out. `run(options)` receives the `Options`, a `run()`
without parameters is called as it is. The same knobs are read from
`CONVERGE_BENCH_SIZES`, `_MODES`, `_SHAPES`, `_DATABASE_URL`, `_AMQP_URL`,
`_MAX_CASE_SECONDS`, `_RESULTS` and `_BASELINE`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import inspect
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from bench.harness.options import Options, Row, parse_modes, parse_shapes, parse_sizes
from bench.harness.speed import loop_seconds
from shared.logging import configure_logging

HERE = Path(__file__).parent
RESULTS = HERE / "results"
#: Cheap, self-contained modules first; the long ones after.
ORDER = (
    "template_parse",
    "dashboard",
    "critical_path",
    "preemption",
    "api_latency",
    "failover",
    "throughput",
    "baseline",
    "engine_profile",
)


def _defines_run(path: Path) -> bool:
    """Whether the module defines a top-level `run` (read, not imported: importing runs its code)."""
    try:
        source = path.read_text()
    except OSError:
        return False
    return any(line.startswith(("def run(", "async def run(")) for line in source.splitlines())


def modules() -> list[str]:
    """Benchmark modules in bench/: known ones in ORDER, any others after, by name."""
    found = {p.stem for p in HERE.glob("*.py") if not p.stem.startswith("_") and _defines_run(p)}
    return [name for name in ORDER if name in found] + sorted(found - set(ORDER))


def load_average() -> list[str]:
    """The 1, 5 and 15 minute load averages, as /proc/loadavg writes them."""
    try:
        return Path("/proc/loadavg").read_text().split()[:3]
    except OSError:
        return []


def machine() -> dict[str, Any]:
    """What ran the benchmarks, and how fast it ran plain Python when they started
    (`harness.speed`)."""
    mem_kib = 0
    model = ""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average_at_start": load_average(),
        "python_loop_seconds": loop_seconds(),
    }


def commit(checkout: Path | None = None) -> str:
    """The checkout's (default: the current directory's) short commit, `-dirty` if changed."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True, cwd=checkout
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain"], capture_output=True, text=True, check=True, cwd=checkout
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def _shown(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"
    return str(value)


def _met(row: Row) -> str:
    met = row.get("met")
    return "" if met is None else ("yes" if met else "**no**")


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [
        f"# Benchmarks {report['started']}",
        "",
        f"commit `{report['commit']}`, modes `{', '.join(report['modes'])}`, "
        f"{m['cpus']} cores ({m.get('cpu_model', '')}), {m['memory_gib']} GiB, Python {m['python']}, "
        f"load average at start {' '.join(m.get('load_average_at_start', []))}, "
        f"a plain Python loop of 10^7 additions {m.get('python_loop_seconds', '?')} s; "
        f"distributed = {report['options']['distributed']['engines']} engines, "
        f"{report['options']['distributed']['workers']} workers, "
        f"{report['options']['distributed']['observers']} observer(s) over RabbitMQ, all on this machine.",
        "Targets are goals, not assertions.",
        "",
        "| benchmark | mode | figure | value | unit | target | met | note |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in report["rows"]:
        if r.get("section"):
            continue
        lines.append(
            f"| {r['module']} | {r.get('mode', '')} | {r['name']} | {_shown(r['value'])} | {r['unit']} "
            f"| {r.get('target', '')} | {_met(r)} | {r.get('note', '')} |"
        )
    sections: dict[str, list[Row]] = {}
    for r in report["rows"]:
        if r.get("section"):
            sections.setdefault(r["section"], []).append(r)
    for title, rows in sections.items():
        lines += ["", f"## {title}", "", "| figure | value | unit | note |", "| --- | --- | --- | --- |"]
        lines += [f"| {r['name']} | {_shown(r['value'])} | {r['unit']} | {r.get('note', '')} |" for r in rows]
    if report.get("errors"):
        lines += ["", "## Errors", ""]
        lines += [f"- `{name}`: {error}" for name, error in report["errors"].items()]
    return "\n".join(lines) + "\n"


def _call(module: Any, options: Options) -> list[Row]:
    parameters = inspect.signature(module.run).parameters
    result = module.run(options) if parameters else module.run()
    return list(result)


def write(report: dict[str, Any], results: Path, *, latest: bool) -> None:
    """The report as `<started>.json` and `.md`, and as `latest.*` if `latest`."""
    results.mkdir(parents=True, exist_ok=True)
    for stem in (report["started"], "latest") if latest else (report["started"],):
        (results / f"{stem}.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
        (results / f"{stem}.md").write_text(markdown(report))


def parse_args(argv: list[str]) -> tuple[list[str], Options]:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help=f"default: {', '.join(modules())}")
    parser.add_argument("--sizes", type=parse_sizes, help="resource counts, e.g. 1000,10000")
    parser.add_argument("--modes", type=parse_modes, help="up, distributed or both")
    parser.add_argument("--shapes", type=parse_shapes, help="independent, chain, layered")
    parser.add_argument("--repeats", type=int, help="preemption samples")
    parser.add_argument("--engines", type=int, help="distributed mode: engine processes")
    parser.add_argument("--workers", type=int, help="distributed mode: worker processes")
    parser.add_argument("--observers", type=int, help="distributed mode: observer processes")
    parser.add_argument("--max-case-seconds", type=float, help="skip a case estimated to take longer")
    parser.add_argument("--no-profile", action="store_true", help="skip py-spy in engine_profile")
    parser.add_argument("--results", help=f"output directory (default {RESULTS.relative_to(HERE.parent)})")
    parser.add_argument(
        "--baseline", help="a checkout (with its .venv) that `baseline` measures beside this one"
    )
    parser.add_argument(
        "--full", action="store_true", help="every phase and shape at every size, no case time budget"
    )
    args = parser.parse_args(argv)
    unknown = [name for name in args.modules if name not in modules()]
    if unknown:
        parser.error(f"no benchmark module {', '.join(unknown)} (have {', '.join(modules())})")
    options = Options.from_environment(
        sizes=args.sizes,
        modes=args.modes,
        shapes=args.shapes,
        repeats=args.repeats,
        engines=args.engines,
        workers=args.workers,
        observers=args.observers,
        max_case_seconds=args.max_case_seconds,
        profile=False if args.no_profile else None,
        results=args.results,
        baseline=args.baseline,
    )
    if args.full:
        options = options.full()
    return args.modules or modules(), options


def main(argv: list[str]) -> int:
    selected, options = parse_args(argv)
    configure_logging(level=os.environ.get("CONVERGE_LOG_LEVEL", "warning"), fmt="json")
    report: dict[str, Any] = {
        "started": dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ"),
        "commit": commit(),
        "modes": list(options.modes),
        "machine": machine(),
        "options": options.describe(),
        "modules": {},
        "rows": [],
        "errors": {},
    }
    results = Path(options.results) if options.results else RESULTS
    for name in selected:
        print(f"{name}:", flush=True)
        started = time.perf_counter()
        try:
            module = importlib.import_module(f"bench.{name}")
            if not callable(getattr(module, "run", None)):
                print("  (no run function: not a benchmark)", flush=True)
                continue
            rows = _call(module, options)
        except Exception as exc:  # noqa: BLE001 - the outermost loop: record, keep going with the next module
            traceback.print_exc()
            report["errors"][name] = f"{type(exc).__name__}: {exc}"
            rows = []
        report["modules"][name] = {"seconds": round(time.perf_counter() - started, 1)}
        for r in rows:
            report["rows"].append({"module": name, "mode": "", "met": None, "note": "", "target": "", **r})
            if not r.get("section"):
                print(
                    f"  {r['name']} = {r['value']} {r['unit']} (target {r.get('target') or '-'})", flush=True
                )
        write(report, results, latest=selected == modules())
    print(f"wrote {results / report['started']}.json and .md")
    return 1 if report["errors"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
