"""Continuous observation: drift is found, reported, and (with heal) undone; a resource
found gone is recorded missing even without heal (the next update creates it again), and
a stack whose user's update failed is left to its user.

Real: the engine's HTTP API over real HTTP, PostgreSQL, the engine's
scheduler, worker and observer (in-process bus). The world is a `World` of
Test::Thing resources that the tests change behind Converge's back.
Everything is waited for on conditions, with generous bounds.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from services.engine.core.model import StackId
from tests.support.api import call
from tests.support.convergence import Converge, converge
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

TOKENS = "t1=p1,t2=p2"
TEMPLATE: dict[str, Any] = {
    "heat_template_version": "2016-10-14",
    "resources": {
        "db": {"type": "Test::Thing", "properties": {"value": "d", "size": 1}},
        "app": {"type": "Test::Thing", "properties": {"value": "a", "ref": {"get_resource": "db"}}},
    },
}


WITNESS: dict[str, Any] = {
    "heat_template_version": "2016-10-14",
    "resources": {"lookout": {"type": "Test::Thing", "properties": {"value": "w"}}},
}


@pytest.fixture
async def api(database_url: str) -> AsyncIterator[tuple[Converge, str]]:
    async with converge(database_url, seed=0, duplicate_rate=0.0) as cv, cv.http(TOKENS) as base:
        yield cv, base


class Stack:
    def __init__(self, cv: Converge, base: str, stack_id: StackId, name: str) -> None:
        self.cv, self.id = cv, stack_id
        self.url = f"{base}/v1/p1/stacks/{name}/{stack_id}"

    async def act(self, body: dict[str, Any], token: str = "t1") -> tuple[int, Any]:
        status, answer, _ = await call("POST", f"{self.url}/actions", token, body)
        return status, answer

    async def observation(self) -> dict[str, Any]:
        status, body, _ = await call("GET", f"{self.url}/observation", "t1")
        assert status == 200, body
        observation: dict[str, Any] = body["observation"]
        return observation

    async def cycle(self) -> int:
        value = await self.cv.pool.fetchval("SELECT cycle FROM observations WHERE stack_id = $1", self.id)
        return int(value or 0)

    def real(self, name: str) -> Any:
        (real,) = self.cv.world.by_name()[name]
        return real


async def created(
    cv: Converge, base: str, name: str = "watched", template: dict[str, Any] = TEMPLATE
) -> Stack:
    stack_id = await cv.create(name, template)
    assert await cv.settled(stack_id) == ("CREATE", "COMPLETE", "Stack CREATE completed successfully")
    return Stack(cv, base, stack_id, name)


async def test_a_property_changed_out_of_band_is_reported_within_two_rounds(
    api: tuple[Converge, str],
) -> None:
    cv, base = api
    stack = await created(cv, base)
    assert (await stack.observation())["enabled"] is False
    assert await stack.act({"observe_start": {"interval": 1, "heal": False}}) == (200, "")
    await eventually(stack.cycle)  # the first round ran: nothing drifted yet
    assert (await stack.observation())["drifted"] == []

    changed_at = await stack.cycle()
    stack.real("app").properties["value"] = "tampered"
    observation = await eventually(lambda: _drifted(stack))
    seen_in = await cv.pool.fetchval("SELECT cycle FROM drift WHERE stack_id = $1", stack.id)
    assert seen_in <= changed_at + 2, "the first or second round after the change saw it"
    assert observation["enabled"] is True
    assert observation["interval"] == 1
    assert observation["heal"] is False
    assert observation["last_cycle_at"] is not None
    (drift,) = observation["drifted"]
    assert drift["resource_name"] == "app"
    assert drift["physical_resource_id"] == stack.real("app").physical_id
    assert drift["differences"] == {"value": {"expected": "a", "actual": "tampered"}}
    assert "value" in drift["reason"]
    events = [(e["resource_name"], e["action"], e["status"]) for e in await cv.events(stack.id)]
    assert ("app", "OBSERVE", "DRIFTED") in events
    assert stack.real("app").properties["value"] == "tampered"  # heal is off: reported, not undone

    stack.real("app").properties["value"] = "a"  # put back by hand: the drift goes away
    await eventually(lambda: _in_line(stack))


async def test_heal_updates_in_place_replaces_and_recreates(api: tuple[Converge, str]) -> None:
    cv, base = api
    stack = await created(cv, base)
    await stack.act({"observe_start": {"interval": 1, "heal": True}})

    # A property updated in place.
    app = stack.real("app")
    app.properties["value"] = "tampered"
    await eventually(lambda: _value_is(stack, "app", "a"))
    assert stack.real("app").physical_id == app.physical_id
    await eventually(lambda: _in_line(stack))

    # A property whose change forces replacement.
    db = stack.real("db")
    db.properties["size"] = 7
    await eventually(lambda: _replaced(stack, "db", db.physical_id))
    assert stack.real("db").properties["size"] == 1

    # Deleted behind Converge's back: created again.
    gone = stack.real("app").physical_id
    del cv.world.live[gone]
    await eventually(lambda: _replaced(stack, "app", gone))

    # In an error state: replaced.
    broken = stack.real("db").physical_id
    cv.world.broken.add(broken)
    await eventually(lambda: _replaced(stack, "db", broken))
    assert broken not in cv.world.live

    await eventually(lambda: _in_line(stack))
    action, status, _ = await cv.settled(stack.id)
    assert (action, status) == ("UPDATE", "COMPLETE")
    reasons = [e["reason"] for e in await cv.events(stack.id) if e["resource_name"] == "watched"]
    assert any(r.startswith("Healing drift of app") for r in reasons)
    assert sorted(cv.world.by_name()) == ["app", "db"]
    assert all(len(reals) == 1 for reals in cv.world.by_name().values()), "nothing duplicated"


async def test_without_heal_a_resource_found_gone_is_created_again_by_the_next_update(
    api: tuple[Converge, str],
) -> None:
    cv, base = api
    stack = await created(cv, base)
    await stack.act({"observe_start": {"interval": 1, "heal": False}})
    db, gone = stack.real("db"), stack.real("app").physical_id
    del cv.world.live[gone]
    await eventually(lambda: _drifted(stack))
    (drift,) = (await stack.observation())["drifted"]
    assert (drift["resource_name"], drift["physical_resource_id"]) == ("app", gone)
    status, body, _ = await call("GET", f"{stack.url}/resources/app", "t1")
    assert status == 200, body
    assert body["resource"]["resource_status"] == "CHECK_FAILED", "recorded missing on the row"
    assert not body["resource"]["physical_resource_id"]
    assert "app" not in cv.world.by_name(), "not healed: heal is off"

    await cv.update(stack.id, TEMPLATE)  # the same goal: the missing resource is created again
    assert (await cv.settled(stack.id))[:2] == ("UPDATE", "COMPLETE")
    assert stack.real("app").physical_id != gone
    assert stack.real("db").physical_id == db.physical_id, "what exists is left alone"
    assert stack.real("app").properties["ref"] == db.physical_id
    await eventually(lambda: _in_line(stack))


async def test_heal_leaves_a_stack_whose_users_update_failed_to_its_user(api: tuple[Converge, str]) -> None:
    cv, base = api
    stack = await created(cv, base)
    await stack.act({"observe_start": {"interval": 1, "heal": True}})
    failing = {**TEMPLATE, "resources": {**TEMPLATE["resources"]}}
    failing["resources"]["app"] = {
        "type": "Test::Thing",
        "properties": {"value": "a2", "ref": {"get_resource": "db"}, "fail": True},
    }
    await cv.update(stack.id, failing)
    assert (await cv.settled(stack.id))[:2] == ("UPDATE", "FAILED")
    gone = stack.real("db").physical_id
    del cv.world.live[gone]
    await eventually(lambda: _drifted(stack))
    three_more = await stack.cycle() + 3
    await eventually(lambda: _at_least(stack, three_more))
    assert await cv.state(stack.id) == ("UPDATE", "FAILED"), "no heal of the user's failed update"
    reasons = [e["reason"] for e in await cv.events(stack.id) if e["resource_name"] == "watched"]
    assert not any(r.startswith("Healing") for r in reasons)

    await cv.update(stack.id, TEMPLATE)  # the user's own fix also creates what went missing
    assert (await cv.settled(stack.id))[:2] == ("UPDATE", "COMPLETE")
    assert stack.real("db").physical_id != gone
    assert stack.real("app").properties == {"value": "a", "ref": stack.real("db").physical_id}


async def test_after_observe_stop_no_observation_starts(api: tuple[Converge, str]) -> None:
    cv, base = api
    stack = await created(cv, base)
    # A second stack stays under observation: its rounds show time passing for the scheduler.
    witness = await created(cv, base, "witness", WITNESS)
    for observed in (stack, witness):
        await observed.act({"observe_start": {"interval": 1, "heal": True}})
    await eventually(lambda: _at_least(stack, 2))
    assert await stack.act({"observe_stop": None}) == (200, "")
    ids = [stack.real(name).physical_id for name in ("app", "db")]
    stopped_at, looked = await stack.cycle(), sum(cv.world.looks[i] for i in ids)

    three_more = await witness.cycle() + 3
    await eventually(lambda: _at_least(witness, three_more))
    assert await stack.cycle() == stopped_at
    assert sum(cv.world.looks[i] for i in ids) <= looked + 2, "at most the round already in flight"
    assert (await stack.observation())["enabled"] is False

    stack.real("app").properties["value"] = "tampered"
    witness.real("lookout").properties["value"] = "tampered"
    await eventually(lambda: _value_is(witness, "lookout", "w"))  # healed: rounds go on
    assert stack.real("app").properties["value"] == "tampered", "no healing once stopped"


async def test_bad_observe_requests_are_refused_and_change_nothing(api: tuple[Converge, str]) -> None:
    cv, base = api
    stack = await created(cv, base)
    bad: list[tuple[dict[str, Any], str]] = [
        ({"observe_start": {"interval": 0.5}}, "interval"),
        ({"observe_start": {"interval": "often"}}, "interval"),
        ({"observe_start": {"interval": 5, "heal": "yes"}}, "heal"),
        ({"observe_start": {"interval": 5, "every": 1}}, "every"),
        ({"observe_start": [5]}, "observe_start"),
    ]
    for body, field in bad:
        status, answer = await stack.act(body)
        assert status == 400, (body, answer)
        assert field in answer["error"]["message"], answer
    assert (await stack.observation())["enabled"] is False
    status, _ = await stack.act({"observe_start": {"interval": 5}}, token="t2")
    assert status == 404  # another project's stack does not exist for it
    status, _, _ = await call("GET", f"{stack.url}/observation", "t2")
    assert status == 404


async def _drifted(stack: Stack) -> dict[str, Any] | None:
    observation = await stack.observation()
    return observation if observation["drifted"] else None


async def _in_line(stack: Stack) -> bool:
    drifted: list[Any] = (await stack.observation())["drifted"]
    return drifted == []


async def _value_is(stack: Stack, name: str, value: str) -> bool:
    reals = stack.cv.world.by_name().get(name, [])
    return len(reals) == 1 and reals[0].properties.get("value") == value


async def _replaced(stack: Stack, name: str, old: str) -> bool:
    reals = stack.cv.world.by_name().get(name, [])
    return len(reals) == 1 and reals[0].physical_id != old and old not in stack.cv.world.live


async def _at_least(stack: Stack, cycles: int) -> bool:
    return await stack.cycle() >= cycles
