"""`make bench`: run every benchmark module and record the results.

Writes `bench/results/<timestamp>.json` and `.md` (and `latest.*`), each
recording the machine, the commit and the mode, with every figure beside its
target. Targets are goals, reported, never asserted.

    python -m bench [module ...]     (default: every module in bench/)
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from shared.logging import configure_logging

HERE = Path(__file__).parent
RESULTS = HERE / "results"


def modules() -> list[str]:
    return sorted(p.stem for p in HERE.glob("*.py") if not p.stem.startswith("_"))


def machine() -> dict[str, Any]:
    mem_kib = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
        dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# Benchmarks {report['started']}",
        "",
        f"commit `{report['commit']}`, mode `{report['mode']}`, "
        f"{report['machine']['cpus']} cores, {report['machine']['memory_gib']} GiB, "
        f"Python {report['machine']['python']}",
        "",
        "| benchmark | figure | value | unit | target |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in report["rows"]:
        value = row["value"]
        shown = f"{value:.4g}" if isinstance(value, float) else str(value)
        lines.append(
            f"| {row['module']} | {row['name']} | {shown} | {row['unit']} | {row.get('target', '')} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("modules", nargs="*", default=modules())
    parser.add_argument("--mode", default=os.environ.get("CONVERGE_BENCH_MODE", "up"))
    args = parser.parse_args(argv)
    configure_logging(level=os.environ.get("CONVERGE_LOG_LEVEL", "warning"), fmt="json")
    started = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    rows: list[dict[str, Any]] = []
    for name in args.modules:
        module = importlib.import_module(f"bench.{name}")
        for row in module.run():
            rows.append({"module": name, **row})
            print(f"{name}: {row['name']} = {row['value']} {row['unit']} (target {row.get('target', '-')})")
    report = {"started": started, "commit": commit(), "mode": args.mode, "machine": machine(), "rows": rows}
    RESULTS.mkdir(parents=True, exist_ok=True)
    for stem in (started, "latest"):
        (RESULTS / f"{stem}.json").write_text(json.dumps(report, indent=2) + "\n")
        (RESULTS / f"{stem}.md").write_text(markdown(report))
    print(f"wrote {RESULTS / started}.json and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
