"""Per-project quotas: a project at its stack quota is refused with a clear 4xx.

Real: the engine's HTTP app over real HTTP, PostgreSQL, engine, worker and
observer (in-process bus), with the deployment's quota set low. (Resources per
stack are limited by the template limits: tests/unit/template/test_loader_limits.py.)
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.api import call
from tests.support.convergence import converge
from tests.support.engine_settings import engine_settings

pytestmark = pytest.mark.integration


def template(count: int) -> dict[str, object]:
    resources = {f"r{i}": {"type": "OS::Heat::None"} for i in range(count)}
    return {"heat_template_version": "2016-10-14", "resources": resources}


@pytest.fixture
async def base(database_url: str) -> AsyncIterator[str]:
    settings = engine_settings(max_stacks_per_project=2)
    async with (
        converge(database_url, seed=0, duplicate_rate=0.0, settings=settings) as cv,
        cv.http("t1=p1,t2=p2") as url,
    ):
        yield url


async def test_a_project_at_its_stack_quota_is_refused_and_others_are_not(base: str) -> None:
    for name in ("one", "two"):
        status, body, _ = await call(
            "POST", f"{base}/v1/p1/stacks", "t1", {"stack_name": name, "template": template(1)}
        )
        assert status == 201, body
    status, body, _ = await call(
        "POST", f"{base}/v1/p1/stacks", "t1", {"stack_name": "three", "template": template(1)}
    )
    assert status == 400
    assert "quota exceeded: at most 2 stacks per project" in body["error"]["message"]
    status, body, _ = await call("GET", f"{base}/v1/p1/stacks", "t1")
    assert sorted(s["stack_name"] for s in body["stacks"]) == ["one", "two"]
    status, body, _ = await call(
        "POST", f"{base}/v1/p2/stacks", "t2", {"stack_name": "three", "template": template(1)}
    )
    assert status == 201, body
