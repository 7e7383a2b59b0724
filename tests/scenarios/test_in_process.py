"""The scenario library in one process, under many seeds of delivery disorder.

Real: PostgreSQL, the engine's convergence code, the worker, the observer,
the plugins. The in-process bus shuffles and duplicates deliveries from the
seed (CONVERGE_TEST_SEEDS, default 20); the cloud is a `World`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from tests.scenarios.library import SCENARIOS
from tests.support.convergence import converge
from tests.support.harness import Harness

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__ for s in SCENARIOS])
async def test_scenario(scenario: Callable[[Harness], Awaitable[None]], database_url: str, seed: int) -> None:
    async with converge(database_url, seed=seed) as cv:
        await scenario(cv)
