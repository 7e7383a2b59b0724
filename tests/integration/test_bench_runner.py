"""`python -m bench` runs end to end and writes its report; speed is not judged.

Real: the bench runner as a subprocess, one `converge up` process on a
scratch database of the test PostgreSQL, a 20-resource layered stack
created, updated and deleted through the HTTP API. The results go to a
temporary directory, never to bench/results.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench.__main__ import modules
from tests.conftest import AMQP_URL, DB_URL


def test_modules_are_the_files_that_define_run() -> None:
    found = modules()
    assert found[0] == "template_parse", "the cheap, self-contained module first"
    expected = {"dashboard", "critical_path", "throughput", "preemption", "failover", "engine_profile"}
    assert expected <= set(found)
    assert "harness" not in found


def test_a_tiny_throughput_run_writes_json_and_markdown(tmp_path: Path) -> None:
    env = {**os.environ, "CONVERGE_BENCH_DATABASE_URL": DB_URL, "CONVERGE_BENCH_AMQP_URL": AMQP_URL}
    argv = ["throughput", "--sizes", "20", "--modes", "up", "--shapes", "layered", "--results", str(tmp_path)]
    done = subprocess.run(
        [sys.executable, "-m", "bench", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "latest.json").read_text())
    figures = {r["name"]: r for r in report["rows"] if r["module"] == "throughput"}
    for phase in ("create", "update", "delete"):
        assert figures[f"{phase} layered 20"]["value"] > 0, figures
    assert any(name.startswith("peak RSS up") for name in figures)
    assert report["machine"]["cpus"]
    assert report["commit"]
    assert "| throughput | up | create layered 20 |" in (tmp_path / "latest.md").read_text()
