"""The benchmarks' CPU counts (bench/harness/cpu.py): a service is charged the CPU of
the processes it started, also of one that ended and was reaped, and not that of a
process outside it; PostgreSQL's work is counted under its command name.

Real: Python processes burning CPU under a stand-in service process, and a query
burning CPU in the test PostgreSQL. Nothing is timed: each burner runs until the
kernel has counted its CPU, however long a busy machine takes.
"""

from __future__ import annotations

import subprocess
import sys

import asyncpg
import pytest

from bench.harness.cpu import snapshot, spent

pytestmark = pytest.mark.integration

#: Spends `sys.argv[1]` seconds of CPU, says so, then waits for its standard input to close.
BURNER = """
import sys, time
while time.process_time() < float(sys.argv[1]):
    pass
print("burned", flush=True)
sys.stdin.read()
"""

#: On "go": one burner that it waits for (ended, reaped) and one left running; then "done".
SERVICE = f"""
import subprocess, sys
burner = [sys.executable, "-c", {BURNER!r}, "0.5"]
sys.stdin.readline()
ended = subprocess.Popen(burner, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
running = subprocess.Popen(burner, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
ended.wait()
running.stdout.readline()
print("done", flush=True)
sys.stdin.read()
running.stdin.close()
running.wait()
"""


def _start(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


def _say(process: subprocess.Popen[str], line: str) -> None:
    assert process.stdin is not None
    process.stdin.write(line)
    process.stdin.flush()


def _heard(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    return process.stdout.readline()


def _finish(process: subprocess.Popen[str]) -> None:
    """Close its input (each waits for that), then reap it."""
    assert process.stdin is not None
    process.stdin.close()
    process.wait(timeout=60)
    assert process.stdout is not None
    process.stdout.close()


def test_a_service_is_charged_its_childrens_cpu_and_not_another_process() -> None:
    service = _start(SERVICE)
    outsider = _start(BURNER, "0.5")
    try:
        before = snapshot({"svc": service.pid})
        _say(service, "go\n")
        assert _heard(service) == "done\n"
        assert _heard(outsider) == "burned\n"
        used = spent(before, snapshot({"svc": service.pid}))
    finally:
        _finish(service)
        _finish(outsider)
    # Two burners of 0.5 s each (one ended and reaped, one running), their start-up and
    # the service's own few ticks; the outsider's 0.5 s would take it past 1.4.
    assert 1.0 <= used["svc"] < 1.4, used


async def test_postgresql_is_counted_under_its_command(database_url: str) -> None:
    connection = await asyncpg.connect(database_url)
    try:
        before = snapshot({})
        total = await connection.fetchval("SELECT sum(g) FROM generate_series(1, 10000000) AS g")
        used = spent(before, snapshot({}))
    finally:
        await connection.close()
    assert total == 10_000_000 * 10_000_001 // 2
    assert set(used) == {"postgres", "beam.smp"}
    # Summing ten million rows takes a backend well over 0.2 s of CPU (about 1 s here);
    # other work on the machine's PostgreSQL can only add to it.
    assert used["postgres"] >= 0.2, used
