"""The template pool runs template work in bounded worker processes and stops what overruns.

Real: `TemplatePool` with real worker processes (pebble, forkserver), real
signals killing a worker past its time limit, a real RLIMIT_AS in each worker,
and the real template jobs (`goals.load_goal`). The slow and greedy jobs are
small functions of this module (the workers import it like any job's module).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from services.engine.goals import GoalSpec, load_goal, validate_goal
from services.engine.template import StackIdentity, TemplateInvalid, TemplateLimits
from services.engine.template_pool import (
    TemplatePool,
    TemplateTooBig,
    TemplateTooSlow,
    TemplateWorkerDied,
    TemplateWorkRefused,
)
from shared.errors import InvalidInput
from shared.plugins.registry import load_types
from tests.support.waiting import eventually

IDENTITY = StackIdentity("s", "00000000-0000-0000-0000-000000000001", "p")
TYPES = dict(load_types())
TEMPLATE = {
    "heat_template_version": "2018-08-31",
    "parameters": {"n": {"type": "number", "default": 2}},
    "resources": {
        "a": {"type": "OS::Heat::Value", "properties": {"value": {"list_join": ["-", ["x", "y"]]}}},
        "b": {"type": "OS::Heat::Value", "properties": {"value": {"get_attr": ["a", "value"]}}},
    },
}


def sleep_for(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def pid() -> int:
    return os.getpid()


def allocate(size: int) -> int:
    return len(bytearray(size))


def die() -> None:
    os._exit(3)


@pytest.fixture
async def pool() -> AsyncIterator[TemplatePool]:
    pool = TemplatePool(workers=1, timeout_seconds=2, memory_bytes=512 * 1024 * 1024)
    await pool.start()
    try:
        yield pool
    finally:
        pool.close()


async def test_a_template_is_loaded_in_a_worker_and_comes_back_whole(pool: TemplatePool) -> None:
    loaded = await pool.run(load_goal, GoalSpec(TEMPLATE), IDENTITY, TYPES, TemplateLimits())
    inline = load_goal(GoalSpec(TEMPLATE), IDENTITY, TYPES, TemplateLimits())
    assert loaded.goal == inline.goal
    assert loaded.definition.resources == inline.definition.resources
    assert loaded.definition.dependents("a") == frozenset({"b"})
    assert await pool.run(pid) != os.getpid()


async def test_errors_come_back_with_their_type_and_every_path(pool: TemplatePool) -> None:
    bad = {
        "heat_template_version": "2018-08-31",
        "resources": {"a": {"type": "Nope"}, "b": {"type": "Nope2"}},
    }
    with pytest.raises(TemplateInvalid) as caught:
        await pool.run(load_goal, GoalSpec(bad), IDENTITY, TYPES, TemplateLimits())
    assert [e.path for e in caught.value.errors] == ["resources.a.type", "resources.b.type"]
    with pytest.raises(InvalidInput) as refused:
        await pool.run(validate_goal, GoalSpec("not: [valid"), "p", TYPES, TemplateLimits())
    assert refused.value.path == "template"


async def test_a_job_past_its_time_limit_is_killed_and_its_worker_replaced(pool: TemplatePool) -> None:
    before = await pool.run(pid)
    with pytest.raises(TemplateTooSlow) as caught:
        await pool.run(sleep_for, 60)
    assert "longer than 2 s" in str(caught.value)
    assert "CONVERGE_TEMPLATE_TIMEOUT_SECONDS" in str(caught.value)
    assert isinstance(caught.value, InvalidInput)
    after = await pool.run(pid)  # a new worker answers
    assert after != before
    await eventually(lambda: not Path(f"/proc/{before}").exists())  # killed, and reaped


async def test_a_worker_cannot_take_more_than_its_memory(pool: TemplatePool) -> None:
    with pytest.raises(TemplateTooBig) as caught:
        await pool.run(allocate, 2 * 1024 * 1024 * 1024)
    assert "512 MiB" in str(caught.value)
    assert "CONVERGE_TEMPLATE_WORKER_MEMORY_BYTES" in str(caught.value)
    assert await pool.run(allocate, 1024) == 1024  # the same worker goes on


async def test_a_worker_that_dies_is_answered_and_replaced(pool: TemplatePool) -> None:
    with pytest.raises(TemplateWorkerDied, match="exit code 3"):
        await pool.run(die)
    assert await pool.run(allocate, 10) == 10


async def test_jobs_beyond_the_workers_wait_their_turn() -> None:
    pool = TemplatePool(workers=2, timeout_seconds=10, memory_bytes=0)
    try:
        pids = await asyncio.gather(*(pool.run(sleep_for, 0.2) for _ in range(6)))
    finally:
        pool.close()
    assert len(set(pids)) <= 2


def test_refusals_are_invalid_input() -> None:
    for cls in (TemplateTooSlow, TemplateTooBig, TemplateWorkerDied):
        assert issubclass(cls, TemplateWorkRefused)
        assert issubclass(cls, InvalidInput)


#: Started from a script, as `converge-engine` is (its own directory first on its module
#: path, not the current one): says whether the pool's workers have the probe loaded.
PROBE_DRIVER = """
import asyncio
from services.engine.template_pool import TemplatePool

async def main() -> None:
    pool = TemplatePool(workers=1, timeout_seconds=30, memory_bytes=0, preload=["converge_cwd_probe"])
    try:
        print(await pool.run(eval, "'converge_cwd_probe' in __import__('sys').modules"))
    finally:
        pool.close()

if __name__ == "__main__":
    asyncio.run(main())
"""


def probe_loaded(tmp_path: Path, **env: str) -> str:
    """Start a pool from a script, in a directory holding a module the pool is told to
    preload; what its worker says of that module."""
    here, scripts = tmp_path / "cwd", tmp_path / "scripts"
    here.mkdir(exist_ok=True)
    scripts.mkdir(exist_ok=True)
    (here / "converge_cwd_probe.py").write_text("LOADED = True\n")
    (scripts / "driver.py").write_text(PROBE_DRIVER)
    done = subprocess.run(
        [sys.executable, str(scripts / "driver.py")],
        cwd=here,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.strip()


def test_the_workers_import_nothing_from_the_directory_the_engine_was_started_in(tmp_path: Path) -> None:
    """The fork server starts as `python -c`, which would put the current directory first
    on its module path: a `services` folder there (another checkout's, anyone's) would be
    the code the workers run. A module the pool preloads is not found there; found where
    the module path does name it (the probe works)."""
    assert probe_loaded(tmp_path) == "False"
    assert probe_loaded(tmp_path, PYTHONPATH=str(tmp_path / "cwd")) == "True"
