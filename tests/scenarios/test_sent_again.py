"""Every message may arrive again as a new message — another id, so the engine's inbox
does not drop it — as recovery sends work in flight again (services/engine/recovery.py),
and the scenario library still ends exactly as it should: a check sent again stops when
its node is done or its job is in flight (its own, or its replacement's), a job sent again
is the same action under the same idempotency key, a result or a watch sent again is
stale or already recorded. Nothing is created twice, nothing is left behind.

Real: PostgreSQL, the engine's convergence code, the worker, the observer, the plugins.
The in-process bus shuffles and duplicates deliveries from the seed and sends a third of
the messages again under a new id; the cloud is a `World`. Seeds: one in twenty of
CONVERGE_TEST_SEEDS (default 6).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable

import pytest

from tests.scenarios.library import SCENARIOS
from tests.support.convergence import converge
from tests.support.harness import Harness

pytestmark = pytest.mark.integration

RESEND_SEEDS = range(0, int(os.environ.get("CONVERGE_TEST_SEEDS", "6")), 20)


@pytest.mark.parametrize("resend_seed", RESEND_SEEDS)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__ for s in SCENARIOS])
async def test_scenario_with_every_message_maybe_sent_again_under_a_new_id(
    scenario: Callable[[Harness], Awaitable[None]], database_url: str, resend_seed: int
) -> None:
    async with converge(database_url, seed=resend_seed, resend_rate=0.33) as cv:
        await scenario(cv)
        assert await cv.dead_letters() == [], "no message was given up on"
