"""An AutoScalingGroup scaled by a policy signal while engines are SIGKILLed: nothing is lost.

Real: PostgreSQL, RabbitMQ, every service as its own OS process (2 engines, 2 workers, an
observer; tests/support/service_cluster.py), the policy signalled over HTTP with its own
token as an alarm would, and a REST API on 127.0.0.1 managed through
Converge::HTTP::Resource, whose items are the real members. The engine that took the
signal is killed as soon as it answered (its outbox may hold the rescale's messages), and
the other one while the group's child stack is creating the new members (they stay BUILD
until the test makes them ACTIVE). The group still ends at the size the signal decided,
each new member created once, the survivors untouched.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest

from services.engine.goals import Goal
from tests.support.fake_rest_api import FakeApi, serve
from tests.support.service_cluster import Driver, ServiceCluster
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


def scaling(api: FakeApi) -> Goal:
    member = {
        "type": "Converge::HTTP::Resource",
        "properties": {"url": f"{api.base}/things", "body": {"kind": "member"}, "status_field": "status"},
    }
    template = {
        "heat_template_version": "2016-10-14",
        "resources": {
            "asg": {
                "type": "OS::Heat::AutoScalingGroup",
                "properties": {"min_size": 1, "max_size": 6, "desired_capacity": 2, "resource": member},
            },
            "up": {
                "type": "OS::Heat::ScalingPolicy",
                "properties": {
                    "auto_scaling_group_id": {"get_resource": "asg"},
                    "adjustment_type": "change_in_capacity",
                    "scaling_adjustment": 2,
                },
            },
        },
    }
    return Goal(template, {}, {}, {})


@dataclass
class Scaling:
    driver: Driver
    api: FakeApi
    cluster: ServiceCluster

    async def row(self, top: uuid.UUID, name: str) -> dict[str, Any]:
        row = await self.driver.pool.fetchrow(
            "SELECT * FROM resources WHERE stack_id = $1 AND name = $2 AND replaced_by IS NULL", top, name
        )
        assert row is not None
        out = dict(row)
        if isinstance(out["attributes"], str):
            out["attributes"] = json.loads(out["attributes"])
        return out

    async def child(self, top: uuid.UUID) -> dict[str, Any]:
        row = await self.driver.pool.fetchrow(
            "SELECT * FROM stacks WHERE owner_stack_id = $1 AND deleted_at IS NULL", top
        )
        assert row is not None
        return dict(row)

    async def signal(self, engine: str, top: uuid.UUID, policy: str, token: str) -> None:
        """POST the policy's signal URL on `engine`'s API with the policy's token, retrying
        a 409 (the group busy) as an alarm does."""
        url = f"{self.cluster.api_url(engine)}/v1/p/stacks/top/{top}/resources/{policy}/signal"
        headers = {"X-Auth-Token": token, "Content-Type": "application/json"}
        async with aiohttp.ClientSession() as http, asyncio.timeout(60):
            while True:
                async with http.post(url, json={"current": "alarm"}, headers=headers) as answer:
                    if answer.status == 200:
                        return
                    assert answer.status == 409, await answer.text()
                await asyncio.sleep(0.1)

    def members(self) -> list[str]:
        return sorted(i for i, item in self.api.items.items() if item.get("kind") == "member")


@pytest.fixture
async def scaling_cluster(database_url: str, amqp_url: str, queue_prefix: str) -> AsyncIterator[Scaling]:
    cluster = ServiceCluster(database_url=database_url, amqp_url=amqp_url, prefix=queue_prefix)
    async with serve(FakeApi()) as api:
        driver = await Driver.open(database_url, amqp_url, queue_prefix)
        try:
            await cluster.start_all()
            yield Scaling(driver, api, cluster)
        finally:
            await cluster.stop()
            await driver.close()


@pytest.mark.timeout(400)
async def test_killing_engines_mid_scale_loses_nothing(scaling_cluster: Scaling) -> None:
    s = scaling_cluster
    top = await s.driver.operations.create(project_id="p", name="top", goal=scaling(s.api))
    assert (await s.driver.settled(top, timeout=180))[:2] == ("CREATE", "COMPLETE")
    survivors = s.members()
    assert len(survivors) == 2
    policy = await s.row(top, "up")

    s.api.create_status = "BUILD"  # new members stay in progress until the test says so
    await s.signal("engine-a", top, "up", policy["attributes"]["token"])
    await s.cluster.kill("engine-a")  # it answered: the rescale is committed, maybe not published
    await s.cluster.start("engine-a")

    async def new_members_building() -> bool:
        child = await s.child(top)
        return len(s.members()) == 4 and (child["action"], child["status"]) == ("UPDATE", "IN_PROGRESS")

    await eventually(new_members_building, timeout=120)
    await s.cluster.kill("engine-b")  # the child's update is in progress, its new members building
    for item in s.api.items.values():
        item["status"] = "ACTIVE"

    async def scaled() -> bool:
        child = await s.child(top)
        group = await s.row(top, "asg")
        done = (child["action"], child["status"]) == ("UPDATE", "COMPLETE")
        return done and group["attributes"].get("current_size") == 4

    await eventually(scaled, timeout=180)
    group = await s.row(top, "asg")
    assert (group["action"], group["status"]) == ("CREATE", "COMPLETE")
    refs = group["attributes"]["refs"]
    assert sorted(refs[:2]) == survivors, "the survivors keep their members, oldest first"
    assert sorted(refs) == s.members()
    assert len(s.api.created) == 4, "each member was created once"
    assert await s.driver.dead_letters() == []
    killed = [p for name, p in s.cluster.retired if name == "engine-a"]
    assert any(e.get("event") == "scaling_signal" for e in killed[0].events), "engine-a took the signal"
