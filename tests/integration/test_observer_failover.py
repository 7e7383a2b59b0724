"""An observation in progress on an observer that dies is picked up by another.

Real: PostgreSQL, RabbitMQ, an engine, a worker and two observers as OS
processes; a REST API on 127.0.0.1 managed through Converge::HTTP::Resource,
whose item stays BUILD until the test flips it to ACTIVE. The observer
watching it (found from its log) is SIGKILLed mid-watch; its request goes
back to the queue and the other observer finishes the create.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from services.engine.goals import Goal
from tests.support.fake_rest_api import FakeApi, serve
from tests.support.service_cluster import Driver, ServiceCluster

pytestmark = pytest.mark.integration


@pytest.fixture
async def api() -> AsyncIterator[FakeApi]:
    async with serve(FakeApi(create_status="BUILD")) as running:
        yield running


def template(api: FakeApi) -> dict[str, Any]:
    things = f"{api.base}/things"
    return {
        "heat_template_version": "2018-08-31",
        "resources": {
            "slow": {
                "type": "Converge::HTTP::Resource",
                "properties": {"url": things, "body": {"_name": "slow"}, "status_field": "status"},
            },
            "after": {
                "type": "Converge::HTTP::Resource",
                "properties": {
                    "url": things,
                    "body": {"_name": "after", "parent": {"get_attr": ["slow", "id"]}},
                },
            },
        },
    }


def watching_slow(event: dict[str, Any]) -> bool:
    return event.get("event") == "watching" and event.get("resource") == "slow"


@pytest.mark.timeout(180)
async def test_a_watch_on_a_killed_observer_is_finished_by_the_other(
    database_url: str, amqp_url: str, queue_prefix: str, api: FakeApi
) -> None:
    driver = await Driver.open(database_url, amqp_url, queue_prefix)
    cluster = ServiceCluster(
        database_url=database_url, amqp_url=amqp_url, prefix=queue_prefix, engines=1, workers=1, observers=2
    )
    observers = ["observer-a", "observer-b"]
    try:
        await cluster.start_all()
        stack = await driver.operations.create(project_id="p", name="slow", goal=Goal(template(api)))
        watcher = await cluster.wait_logged(observers, watching_slow)
        await cluster.kill(watcher)
        (survivor,) = [name for name in observers if name != watcher]
        await cluster.wait_logged([survivor], watching_slow)  # the request came back to the queue
        (item,) = api.items.values()
        item["status"] = "ACTIVE"
        assert await driver.settled(stack, timeout=60) == (
            "CREATE",
            "COMPLETE",
            "Stack CREATE completed successfully",
        )
        settled = cluster.logged(
            survivor, lambda e: e.get("event") == "settled" and e.get("resource") == "slow"
        )
        assert [e["outcome"] for e in settled] == ["complete"], "the survivor reported the outcome"
        by_name = {i["_name"]: i for i in api.items.values()}
        assert sorted(by_name) == ["after", "slow"]
        assert by_name["after"]["parent"] == by_name["slow"]["id"]
        assert len(api.created) == 2, "nothing was created twice"
        assert cluster.exited() == {}
    finally:
        await cluster.stop()
        await driver.close()
