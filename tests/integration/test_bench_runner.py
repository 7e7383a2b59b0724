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
    expected = {
        "dashboard",
        "critical_path",
        "throughput",
        "baseline",
        "preemption",
        "api_latency",
        "failover",
        "engine_profile",
    }
    assert expected <= set(found)
    assert "harness" not in found


def _bench(*argv: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """`python -m bench <argv>` on this run's PostgreSQL and RabbitMQ."""
    env = {**os.environ, "CONVERGE_BENCH_DATABASE_URL": DB_URL, "CONVERGE_BENCH_AMQP_URL": AMQP_URL}
    return subprocess.run(
        [sys.executable, "-m", "bench", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_one_modules_run_writes_its_json_and_markdown_and_leaves_latest_to_full_runs(tmp_path: Path) -> None:
    argv = ["throughput", "--sizes", "20", "--modes", "up", "--shapes", "layered", "--results", str(tmp_path)]
    done = _bench(*argv, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    (written,) = tmp_path.glob("2*.json")
    assert not (tmp_path / "latest.json").exists(), "one module's run is not the latest full run"
    report = json.loads(written.read_text())
    figures = {r["name"]: r for r in report["rows"] if r["module"] == "throughput"}
    for phase in ("create", "update", "delete"):
        assert figures[f"{phase} layered 20"]["value"] > 0, figures
    assert any(name.startswith("peak RSS up") for name in figures)
    assert report["machine"]["cpus"]
    assert report["machine"]["python_loop_seconds"] > 0  # the machine's yardstick (harness.speed)
    assert report["commit"]
    markdown = written.with_suffix(".md").read_text()
    assert "| throughput | up | create layered 20 |" in markdown
    assert f"a plain Python loop of 10^7 additions {report['machine']['python_loop_seconds']} s" in markdown


def test_the_baseline_module_measures_another_checkout_beside_this_one_in_the_same_run(
    tmp_path: Path,
) -> None:
    here = Path(__file__).resolve().parents[2]  # this checkout stands in for the baseline
    argv = ["baseline", "--sizes", "20", "--modes", "up", "--baseline", str(here), "--results", str(tmp_path)]
    done = _bench(*argv, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    rounds = [line.strip() for line in done.stdout.splitlines() if " round " in line]
    assert [r.split(" round ")[1][:1] for r in rounds] == ["1", "1", "2", "2"], rounds
    assert rounds[0].endswith("this checkout ...")
    assert rounds[3].endswith("this checkout ...")
    (written,) = tmp_path.glob("2*.json")
    figures = {r["name"]: r for r in json.loads(written.read_text())["rows"]}
    for phase in ("create", "update", "delete"):
        ratio = figures[f"{phase} layered 20 against the baseline"]
        assert ratio["rate"] > 0, ratio
        assert ratio["baseline_rate"] > 0, ratio
        assert ratio["value"] == round(ratio["rate"] / ratio["baseline_rate"], 2)


def test_the_engine_profile_counts_the_create_the_update_and_the_delete_per_resource(tmp_path: Path) -> None:
    done = _bench("engine_profile", "--sizes", "20", "--no-profile", "--results", str(tmp_path), timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    (written,) = tmp_path.glob("2*.json")
    figures = {r["name"]: r["value"] for r in json.loads(written.read_text())["rows"]}
    assert figures["10k layered create (profiled)"] > 0, figures
    for phase in ("update", "delete"):
        assert figures[f"10k layered {phase}, after it"] > 0, figures
        assert figures[f"CPU ms per resource, engine-a, {phase}"] > 0, figures
        assert figures[f"whole machine busy during the {phase}"] > 0, figures
    assert figures["CPU ms per resource, engine-a"] > 0, figures  # the create's, named as before
    assert "rows written in resources per resource, update" in figures, figures
    for phase in ("create", "update", "delete"):  # what the database sessions did (bench/harness/sessions.py)
        for state in ("waiting for a lock", "idle in transaction", "running"):
            assert figures[f"database sessions {state} during the {phase}, mean"] >= 0, figures


def _quick(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONVERGE_BENCH_DATABASE_URL": DB_URL, "CONVERGE_BENCH_AMQP_URL": AMQP_URL}
    return subprocess.run(
        [sys.executable, "-m", "bench.quick", "--results", str(tmp_path), *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def test_bench_quick_measures_both_modes_and_prints_them_beside_the_previous_result(tmp_path: Path) -> None:
    previous = tmp_path / "previous.json"
    figures = {
        "create": 100.0,
        "update": 50.0,
        "delete": 200.0,
        "preempt p50": 10.0,
        "preempt p99": 20.0,
        "machine loop": 0.001,  # no machine is that fast: this run's is slower
    }
    previous.write_text(
        json.dumps({"commit": "abc1234", "started": "20260101T000000Z", "figures": {"A": {"up": figures}}})
    )
    # 20 resources, each create taking 1 s, so the updates find a create to preempt.
    done = _quick(tmp_path, "--size", "20", "--repeats", "2", "--wait", "1", "--previous", str(previous))
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "quick-latest.json").read_text())
    for mode in ("up", "distributed"):
        measured = report["figures"]["A"][mode]
        for phase in ("create", "update", "delete"):
            assert measured[phase] > 0, (mode, measured)
        assert measured["preempt p50"] > 0, (mode, measured)
        assert measured["preempt p99"] >= measured["preempt p50"]
    assert report["size"] == 20
    assert report["commit"]
    # The committed figures are printed beside the new ones, with their ratio.
    assert "previous abc1234 (20260101T000000Z)" in done.stdout
    up_create = report["figures"]["A"]["up"]["create"]
    assert f"| up | create (res/s) | 100 | {up_create:g} | {up_create / 100:.2f}x |" in done.stdout
    assert "| distributed | create (res/s) | — |" in done.stdout  # nothing to compare with
    # Each system's run starts with the machine's yardstick, printed beside the previous one.
    loop = report["figures"]["A"]["up"]["machine loop"]
    assert loop > 0
    assert f"| up | machine loop (s for 10^7 additions) | 0.001 | {loop:g} |" in done.stdout
    assert "| machine slower |" in done.stdout


def test_bench_quick_alternates_two_arms_in_one_run(tmp_path: Path) -> None:
    done = _quick(
        tmp_path, "--size", "10", "--repeats", "0", "--modes", "up", "--env-b", "CONVERGE_LOG_LEVEL=error"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    order = [line.split(" ...")[0] for line in done.stdout.splitlines() if line.startswith("round ")]
    assert order == ["round 1 arm A up", "round 1 arm B up", "round 2 arm B up", "round 2 arm A up"]
    written = list(tmp_path.glob("quick-ab-*.json"))
    assert len(written) == 1
    assert not (tmp_path / "quick-latest.json").exists()
    report = json.loads(written[0].read_text())
    assert report["arms"]["B"]["env"] == {"CONVERGE_LOG_LEVEL": "error"}
    for arm in ("A", "B"):
        assert report["figures"][arm]["up"]["create"] > 0
    assert "ratio = B / A" in done.stdout


def test_bench_quick_counts_each_phases_cpu_per_resource(tmp_path: Path) -> None:
    done = _quick(tmp_path, "--size", "200", "--repeats", "0", "--modes", "up")
    assert done.returncode == 0, done.stdout + done.stderr
    figures = json.loads((tmp_path / "quick-latest.json").read_text())["figures"]["A"]["up"]
    for phase in ("create", "update", "delete"):
        # The services' own CPU (`converge up` and its template pool: 200 resources take
        # it well past the kernel's 10 ms tick), then with PostgreSQL's and RabbitMQ's.
        assert 0 < figures[f"{phase} CPU, services"] <= figures[f"{phase} CPU, all"], figures
        assert figures[f"{phase} statements"] > 0, figures  # from the engine's /metrics
    assert "| up | update CPU, services (ms/res) |" in done.stdout
    assert "| up | create statements (per res) |" in done.stdout
