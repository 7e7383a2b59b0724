"""Proves the sandbox cloud's behaviour: builds and their status changes, in-place and
refused updates, referential integrity, idempotency keys, addresses, out-of-band
breakage. Pure: the model on virtual time (`now`) and a seeded random generator."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from services.sandbox.model import Change, Cloud
from services.sandbox.specs import Kind
from shared.errors import ConflictError, InvalidInput, NotFound
from shared.notifications import NotificationEvent as Ev


@dataclass
class World:
    """A cloud, virtual time, and every change it reported."""

    cloud: Cloud
    now: float = 1000.0
    changes: list[Change] = field(default_factory=list)

    def create(self, kind: Kind, body: dict[str, Any], key: str | None = None) -> dict[str, Any]:
        created = self.cloud.create(kind, body, now=self.now, idempotency_key=key)
        self.changes += created.changes
        return created.resource

    def update(self, kind: Kind, rid: str, patch: dict[str, Any]) -> dict[str, Any]:
        view, changes = self.cloud.update(kind, rid, patch, now=self.now)
        self.changes += changes
        return view

    def delete(self, kind: Kind, rid: str) -> None:
        self.changes += self.cloud.delete(kind, rid, now=self.now)

    def wait(self, seconds: float) -> None:
        self.now += seconds
        self.changes += self.cloud.advance(self.now)

    def status(self, kind: Kind, rid: str) -> str:
        return str(self.cloud.get(kind, rid)["status"])

    def events(self, rid: str) -> list[tuple[str, str]]:
        return [(c.event.value, c.status) for c in self.changes if c.physical_id == rid]


def new_world(*, latency: float = 1.0, failure_rate: float = 0.0, seed: int = 7) -> World:
    return World(Cloud(latency=latency, failure_rate=failure_rate, rng=random.Random(seed)))


@pytest.fixture
def world() -> World:
    return new_world()


@dataclass
class WebTier:
    net: str
    subnet: str
    server: str
    volume: str
    attachment: str


def build_web(world: World) -> WebTier:
    net = world.create(Kind.NETWORK, {"name": "net"})["id"]
    subnet = world.create(Kind.SUBNET, {"network": net, "cidr": "10.0.0.0/29"})["id"]
    server = world.create(Kind.SERVER, {"image": "cirros", "networks": [net]})["id"]
    volume = world.create(Kind.VOLUME, {"size": 10})["id"]
    attachment = world.create(Kind.VOLUME_ATTACHMENT, {"server": server, "volume": volume})["id"]
    world.wait(1)
    return WebTier(net, subnet, server, volume, attachment)


# -- builds and status changes -------------------------------------------------------


def test_a_create_builds_then_turns_active_after_the_latency(world: World) -> None:
    rid = world.create(Kind.NETWORK, {"name": "n"})["id"]
    assert world.status(Kind.NETWORK, rid) == "BUILD"
    assert world.cloud.next_due() == world.now + 1.0
    world.wait(0.5)
    assert world.status(Kind.NETWORK, rid) == "BUILD"
    world.wait(0.5)
    assert world.status(Kind.NETWORK, rid) == "ACTIVE"
    assert world.events(rid) == [("created", "BUILD"), ("status_changed", "ACTIVE")]
    assert world.cloud.next_due() is None


@pytest.mark.parametrize(
    ("body", "after", "status", "reason"),
    [
        ({"build_seconds": 5}, 4.9, "BUILD", ""),
        ({"build_seconds": 5}, 5, "ACTIVE", ""),
        ({"build_seconds": 0}, 0, "ACTIVE", ""),
        ({"fail": True}, 1, "ERROR", "the thing was asked to fail (fail: true)"),
        ({"fail": True, "build_seconds": 3}, 2, "BUILD", ""),
    ],
)
def test_a_thing_builds_for_its_own_time_and_fails_on_request(
    world: World, body: dict[str, Any], after: float, status: str, reason: str
) -> None:
    rid = world.create(Kind.THING, body)["id"]
    world.wait(after)
    shown = world.cloud.get(Kind.THING, rid)
    assert (shown["status"], shown["status_reason"]) == (status, reason)


def test_the_failure_rate_fails_builds_reproducibly_from_the_seed() -> None:
    def outcomes(seed: int) -> list[str]:
        world = new_world(failure_rate=0.5, seed=seed)
        ids = [world.create(Kind.VOLUME, {"size": 1})["id"] for _ in range(20)]
        world.wait(1)
        return [world.status(Kind.VOLUME, rid) for rid in ids]

    first = outcomes(3)
    assert first == outcomes(3)
    assert {"ACTIVE", "ERROR"} == set(first)
    failed = new_world(failure_rate=1.0)
    rid = failed.create(Kind.VOLUME, {"size": 1})["id"]
    failed.wait(1)
    assert failed.cloud.get(Kind.VOLUME, rid)["status_reason"] == "simulated failure (failure rate 1)"


def test_break_puts_a_resource_into_error_and_cancels_its_build(world: World) -> None:
    rid = world.create(Kind.SERVER, {"image": "cirros"})["id"]
    view, changes = world.cloud.break_(Kind.SERVER, rid, "disk on fire", now=world.now)
    assert (view["status"], view["status_reason"]) == ("ERROR", "disk on fire")
    assert [(c.event, c.status) for c in changes] == [(Ev.STATUS_CHANGED, "ERROR")]
    world.wait(5)
    assert world.status(Kind.SERVER, rid) == "ERROR", "the cancelled build does not revive it"
    view, _ = world.cloud.break_(Kind.SERVER, rid, "", now=world.now)
    assert view["status_reason"] == "broken out of band"


# -- updates ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "body", "patch", "status_after"),
    [
        (Kind.SERVER, {"image": "cirros"}, {"name": "web-1", "metadata": {"tier": "web"}}, "ACTIVE"),
        (Kind.SERVER, {"image": "cirros"}, {"flavor": "m1.large"}, "BUILD"),
        (Kind.VOLUME, {"size": 10}, {"size": 20}, "BUILD"),
        (Kind.VOLUME, {"size": 10}, {"name": "data"}, "ACTIVE"),
        (Kind.NETWORK, {"name": "a"}, {"name": "b"}, "ACTIVE"),
        (Kind.THING, {"data": {"a": 1}}, {"data": {"a": 2}}, "BUILD"),
    ],
)
def test_in_place_updates_keep_the_id_and_rebuild_only_when_they_must(
    world: World, kind: Kind, body: dict[str, Any], patch: dict[str, Any], status_after: str
) -> None:
    rid = world.create(kind, body)["id"]
    world.wait(1)
    view = world.update(kind, rid, patch)
    assert view["id"] == rid
    assert {k: view[k] for k in patch} == patch
    assert view["status"] == status_after
    assert world.events(rid)[-1] == ("updated", status_after)
    world.wait(1)
    assert world.status(kind, rid) == "ACTIVE"


@pytest.mark.parametrize(
    ("kind", "body", "patch", "message"),
    [
        (Kind.SERVER, {"image": "cirros"}, {"image": "ubuntu"}, "image cannot change in place"),
        (Kind.VOLUME, {"size": 10}, {"size": 5}, "size cannot change in place (size: 10 -> 5)"),
        (Kind.THING, {"fixed": {"a": 1}}, {"fixed": {"a": 2}}, "fixed cannot change in place"),
    ],
)
def test_replace_only_changes_are_refused(
    world: World, kind: Kind, body: dict[str, Any], patch: dict[str, Any], message: str
) -> None:
    rid = world.create(kind, body)["id"]
    with pytest.raises(ConflictError, match=re.escape(message)):
        world.update(kind, rid, patch)


def test_an_update_that_changes_nothing_reports_nothing(world: World) -> None:
    rid = world.create(Kind.SERVER, {"image": "cirros", "name": "a"})["id"]
    before = len(world.changes)
    assert world.update(Kind.SERVER, rid, {"name": "a"})["name"] == "a"
    assert len(world.changes) == before


def test_null_in_a_patch_resets_a_field_to_its_default(world: World) -> None:
    rid = world.create(Kind.SERVER, {"image": "cirros", "flavor": "m1.large"})["id"]
    assert world.update(Kind.SERVER, rid, {"flavor": None})["flavor"] == "m1.small"
    with pytest.raises(InvalidInput, match="image: Field required"):
        world.update(Kind.SERVER, rid, {"image": None})


# -- integrity ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("victim", "message"),
    [
        (lambda w: (Kind.NETWORK, w.net), "it is still used by subnet"),
        (lambda w: (Kind.SUBNET, w.subnet), "it is still used by server"),
        (lambda w: (Kind.SERVER, w.server), "still used by volume_attachment"),
        (lambda w: (Kind.VOLUME, w.volume), "still used by volume_attachment"),
    ],
    ids=["network-with-subnet", "subnet-with-addresses", "attached-server", "attached-volume"],
)
def test_deleting_what_is_still_used_is_refused(
    world: World, victim: Callable[[WebTier], tuple[Kind, str]], message: str
) -> None:
    web = build_web(world)
    kind, rid = victim(web)
    with pytest.raises(ConflictError, match=message):
        world.delete(kind, rid)
    assert world.status(kind, rid) == "ACTIVE"


def test_deleting_in_dependency_order_empties_the_cloud(world: World) -> None:
    web = build_web(world)
    for kind, rid in [
        (Kind.VOLUME_ATTACHMENT, web.attachment),
        (Kind.VOLUME, web.volume),
        (Kind.SERVER, web.server),
        (Kind.SUBNET, web.subnet),
        (Kind.NETWORK, web.net),
    ]:
        world.delete(kind, rid)
        assert world.events(rid)[-1] == ("deleted", "DELETED")
        with pytest.raises(NotFound):
            world.cloud.get(kind, rid)
    assert world.cloud.inventory() == []
    assert sum(world.cloud.counts.values()) == 0


@pytest.mark.parametrize(
    ("kind", "body", "error", "message"),
    [
        (Kind.SUBNET, {"network": "nope", "cidr": "10.9.0.0/24"}, InvalidInput, "subnet.network: no network"),
        (Kind.SERVER, {"image": "i", "networks": ["nope"]}, InvalidInput, "server.networks: no network"),
        (Kind.VOLUME_ATTACHMENT, {"server": "nope", "volume": "v"}, InvalidInput, "no server with id"),
    ],
)
def test_references_must_exist(
    world: World, kind: Kind, body: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        world.create(kind, body)
    assert world.changes == []


def test_a_volume_is_attached_once_and_a_mountpoint_used_once(world: World) -> None:
    web = build_web(world)
    other = world.create(Kind.SERVER, {"image": "cirros"})["id"]
    with pytest.raises(
        ConflictError, match=f"volume {web.volume} is already attached to server {web.server}"
    ):
        world.create(Kind.VOLUME_ATTACHMENT, {"server": other, "volume": web.volume})
    spare = world.create(Kind.VOLUME, {"size": 1})["id"]
    with pytest.raises(ConflictError, match="already has a volume at /dev/vdb"):
        world.create(Kind.VOLUME_ATTACHMENT, {"server": web.server, "volume": spare})


def test_an_attachment_moves_to_another_server_in_place(world: World) -> None:
    web = build_web(world)
    other = world.create(Kind.SERVER, {"image": "ubuntu", "networks": [web.net]})["id"]
    moved = world.update(Kind.VOLUME_ATTACHMENT, web.attachment, {"server": other})
    assert (moved["id"], moved["status"]) == (web.attachment, "BUILD")
    assert world.cloud.get(Kind.VOLUME, web.volume)["attached_to"] == other
    assert world.cloud.get(Kind.SERVER, other)["volumes"] == [web.volume]
    world.delete(Kind.SERVER, web.server)  # no longer attached: the replaced server can go


# -- addresses -------------------------------------------------------------------------------


def test_servers_get_addresses_from_the_first_subnet_and_give_them_back(world: World) -> None:
    net = world.create(Kind.NETWORK, {})["id"]
    lonely = world.create(Kind.SERVER, {"image": "i", "networks": [net]})
    assert (lonely["addresses"], lonely["first_address"]) == ({}, None), "no subnet, no address"
    subnet = world.create(Kind.SUBNET, {"network": net, "cidr": "10.0.0.0/29"})
    assert subnet["gateway_ip"] == "10.0.0.1"
    servers = [world.create(Kind.SERVER, {"image": "i", "networks": [net]}) for _ in range(5)]
    assert [s["first_address"] for s in servers] == [f"10.0.0.{n}" for n in range(2, 7)]
    with pytest.raises(ConflictError, match="has no free addresses"):
        world.create(Kind.SERVER, {"image": "i", "networks": [net]})
    world.delete(Kind.SERVER, servers[1]["id"])
    again = world.create(Kind.SERVER, {"image": "i", "networks": [net]})
    assert again["addresses"] == {net: ["10.0.0.3"]}


# -- idempotency -------------------------------------------------------------------------------


def test_a_create_with_a_key_seen_before_returns_the_same_resource(world: World) -> None:
    first = world.cloud.create(Kind.SERVER, {"image": "i"}, now=world.now, idempotency_key="job-1")
    again = world.cloud.create(Kind.SERVER, {"image": "i"}, now=world.now + 5, idempotency_key="job-1")
    assert not first.replayed
    assert again.replayed
    assert again.changes == ()
    assert again.resource["id"] == first.resource["id"]
    assert world.cloud.counts[Kind.SERVER] == 1
    other = world.cloud.create(Kind.SERVER, {"image": "i"}, now=world.now, idempotency_key="job-2")
    assert other.resource["id"] != first.resource["id"]


@pytest.mark.parametrize(
    ("second", "then_delete", "error", "message"),
    [
        ({"image": "other"}, False, InvalidInput, "was already used for a different server"),
        ({"image": "i"}, True, ConflictError, "which has since been deleted"),
    ],
)
def test_a_reused_key_must_mean_the_same_request_for_a_live_resource(
    world: World, second: dict[str, Any], then_delete: bool, error: type[Exception], message: str
) -> None:
    rid = world.create(Kind.SERVER, {"image": "i"}, key="job-1")["id"]
    if then_delete:
        world.delete(Kind.SERVER, rid)
    with pytest.raises(error, match=message):
        world.create(Kind.SERVER, second, key="job-1")


def test_the_same_seed_makes_the_same_ids() -> None:
    def ids(seed: int) -> list[str]:
        world = new_world(seed=seed)
        return [world.create(Kind.THING, {})["id"] for _ in range(3)]

    assert ids(1) == ids(1)
    assert ids(1) != ids(2)


def test_unknown_ids_and_wrong_kinds_are_not_found(world: World) -> None:
    rid = world.create(Kind.NETWORK, {})["id"]
    with pytest.raises(NotFound, match=f"no server with id '{rid}'"):
        world.cloud.get(Kind.SERVER, rid)
    with pytest.raises(NotFound):
        world.delete(Kind.NETWORK, "missing")
