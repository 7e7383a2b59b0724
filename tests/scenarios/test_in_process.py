"""The scenario library in one process, under many seeds of delivery disorder,
and under a subset of them with engines crashing between any two steps.

Real: PostgreSQL, the engine's convergence code, the worker, the observer,
the plugins. The in-process bus shuffles and duplicates deliveries from the
seed (CONVERGE_TEST_SEEDS, default 6; `make test-long`: 200); the cloud is a `World`. With crashes,
two engines consume and the seed also picks handlers that kill their engine
mid-transaction or after the commit (tests/support/crashes.py); each dead
engine is replaced by a fresh one on the same database.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable

import pytest

from tests.scenarios.library import SCENARIOS
from tests.support.convergence import converge
from tests.support.crashes import CrashPlan
from tests.support.harness import Harness

pytestmark = pytest.mark.integration

# One seed in CRASH_EVERY also runs with engine crashes (2 of the default 6, 50 of 200).
CRASH_EVERY = 4
CRASH_SEEDS = range(0, int(os.environ.get("CONVERGE_TEST_SEEDS", "6")), CRASH_EVERY)
IDS = [s.__name__ for s in SCENARIOS]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
async def test_scenario(scenario: Callable[[Harness], Awaitable[None]], database_url: str, seed: int) -> None:
    async with converge(database_url, seed=seed) as cv:
        await scenario(cv)
        assert await cv.dead_letters() == [], "no message was given up on"


@pytest.mark.parametrize("crash_seed", CRASH_SEEDS)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
async def test_scenario_with_engine_crashes(
    scenario: Callable[[Harness], Awaitable[None]], database_url: str, crash_seed: int
) -> None:
    plan = CrashPlan(f"{scenario.__name__}-{crash_seed}")
    async with converge(database_url, seed=crash_seed, crashes=plan) as cv:
        await scenario(cv)
        assert cv.engines is not None
        await cv.engines.planned_crashes_reached()
        assert cv.crashes, "an engine crashed during the scenario"
        print("crashes:", "; ".join(cv.crashes))  # where each happened (-s shows them)
        assert await cv.dead_letters() == [], "no message was given up on"
