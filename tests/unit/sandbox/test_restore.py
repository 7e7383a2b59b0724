"""Proves a sandbox cloud restored from its records (what the state file keeps) is the same
cloud: it answers every later request exactly as the original would — ids, addresses,
builds finishing at their instants, idempotent replays, refused deletes. Pure: the model
on virtual time, records through JSON, seeded randomness."""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Callable
from typing import Any

import pytest

from services.sandbox.model import Cloud, KeyRecord
from services.sandbox.records import resource_from_record, resource_record
from services.sandbox.specs import Kind
from shared.errors import ConflictError, InvalidInput, NotFound


def restored(cloud: Cloud, keys: list[tuple[Kind, str]], rng: random.Random) -> Cloud:
    """`cloud` as a restart restores it from its records (through JSON, as on disk)."""
    records = []
    for view in cloud.inventory():
        res = cloud.resource(view["id"])
        assert res is not None
        records.append(json.loads(json.dumps(resource_record(res))))
    known = [k for k in (cloud.key(kind, key) for kind, key in keys) if k is not None]
    return Cloud.restore(
        [resource_from_record(r) for r in records],
        [KeyRecord(k.kind, k.key, k.fingerprint, k.resource_id) for k in known],
        created=cloud.created,
        generation=cloud.generation,
        latency=1.0,
        failure_rate=0.3,
        rng=rng,
    )


class Script:
    """A seeded random sequence of requests, applied to one or two clouds alike."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(f"script-{seed}")
        self.now = 1000.0
        self.keys: list[tuple[Kind, str]] = []

    def step(self, clouds: list[Cloud]) -> list[Any]:
        """One request (or time passing) on every cloud; what each answered."""
        ids = {kind: [r["id"] for r in clouds[0].list_kind(kind)] for kind in Kind}
        act = self._pick(ids)
        return [_outcome(functools.partial(act, cloud)) for cloud in clouds]

    def _pick(self, ids: dict[Kind, list[str]]) -> Callable[[Cloud], Any]:
        r, now = self.rng, self.now
        choice = r.randrange(9)
        if choice == 0:
            self.now += r.choice([0.2, 0.5, 1.5])
            return lambda c: c.advance(self.now)
        if choice == 1:
            name = f"n{r.random():.3f}"
            return lambda c: c.create(Kind.NETWORK, {"name": name}, now=now).resource
        if choice == 2 and ids[Kind.NETWORK]:
            body: dict[str, Any] = {"network": r.choice(ids[Kind.NETWORK]), "cidr": "10.1.0.0/28"}
            return lambda c: c.create(Kind.SUBNET, body, now=now).resource
        if choice == 3 and ids[Kind.NETWORK]:
            key = f"k{r.randrange(6)}"  # keys come back: replays, and reuses for other bodies
            self.keys.append((Kind.SERVER, key))
            body = {"image": r.choice(["a", "b"]), "networks": [r.choice(ids[Kind.NETWORK])]}
            return lambda c: c.create(Kind.SERVER, body, now=now, idempotency_key=key).resource
        if choice == 4:
            body = {"size": r.randrange(1, 4), "name": "v"}
            return lambda c: c.create(Kind.VOLUME, body, now=now).resource
        if choice == 5 and ids[Kind.SERVER] and ids[Kind.VOLUME]:
            body = {"server": r.choice(ids[Kind.SERVER]), "volume": r.choice(ids[Kind.VOLUME])}
            return lambda c: c.create(Kind.VOLUME_ATTACHMENT, body, now=now).resource
        if choice == 6:
            kinds = [k for k in Kind if ids[k]]
            if kinds:
                kind = r.choice(kinds)
                rid = r.choice(ids[kind])
                return lambda c: c.delete(kind, rid, now=now)
        if choice == 7 and ids[Kind.VOLUME]:
            rid, size = r.choice(ids[Kind.VOLUME]), r.randrange(1, 8)
            return lambda c: c.update(Kind.VOLUME, rid, {"size": size}, now=now)
        if choice == 8 and ids[Kind.SERVER]:
            rid = r.choice(ids[Kind.SERVER])
            return lambda c: c.break_(Kind.SERVER, rid, "lost", now=now)
        return lambda c: c.create(Kind.THING, {"data": {"x": 1}}, now=now).resource


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except (ConflictError, InvalidInput, NotFound) as exc:
        return (type(exc).__name__, str(exc))


@pytest.mark.parametrize("seed", range(25))
def test_a_restored_cloud_answers_every_later_request_as_the_original_would(seed: int) -> None:
    script = Script(seed)
    original = Cloud(latency=1.0, failure_rate=0.3, rng=random.Random(seed))
    for _ in range(script.rng.randrange(20, 80)):
        script.step([original])
    twin_rng = random.Random()
    twin_rng.setstate(original._rng.getstate())  # the same draws to come, so ids can be compared
    twin = restored(original, script.keys, twin_rng)
    assert twin.inventory() == original.inventory()
    for _ in range(80):
        first, second = script.step([original, twin])
        assert second == first
    assert twin.inventory() == original.inventory()
    assert (twin.created, twin.generation, twin.counts) == (
        original.created,
        original.generation,
        original.counts,
    )


def test_a_restored_subnet_hands_out_the_address_a_deleted_server_gave_back_first() -> None:
    cloud = Cloud(latency=0.0, failure_rate=0.0, rng=random.Random(1))
    net = cloud.create(Kind.NETWORK, {}, now=1).resource["id"]
    cloud.create(Kind.SUBNET, {"network": net, "cidr": "10.0.0.0/28"}, now=1)
    servers = [cloud.create(Kind.SERVER, {"image": "a", "networks": [net]}, now=1).resource for _ in range(3)]
    cloud.delete(Kind.SERVER, servers[1]["id"], now=2)
    twin = restored(cloud, [], random.Random(2))
    again = twin.create(Kind.SERVER, {"image": "a", "networks": [net]}, now=3).resource
    assert again["first_address"] == servers[1]["first_address"] == "10.0.0.3"
    assert (
        twin.create(Kind.SERVER, {"image": "a", "networks": [net]}, now=3).resource["first_address"]
        == "10.0.0.5"
    )


def test_a_build_in_progress_when_saved_ends_at_its_instant_after_a_restore() -> None:
    cloud = Cloud(latency=5.0, failure_rate=0.0, rng=random.Random(1))
    thing = cloud.create(Kind.THING, {"build_seconds": 5}, now=100).resource["id"]
    twin = restored(cloud, [], random.Random(2))
    assert twin.get(Kind.THING, thing)["status"] == "BUILD"
    assert twin.next_due() == 105
    assert twin.advance(104.9) == []
    (change,) = twin.advance(105)
    assert (change.physical_id, change.status) == (thing, "ACTIVE")


def test_a_restored_cloud_replays_a_seen_idempotency_key_and_refuses_its_reuse() -> None:
    cloud = Cloud(latency=1.0, failure_rate=0.0, rng=random.Random(1))
    made = cloud.create(Kind.VOLUME, {"size": 1}, now=1, idempotency_key="job-1").resource
    twin = restored(cloud, [(Kind.VOLUME, "job-1")], random.Random(2))
    replay = twin.create(Kind.VOLUME, {"size": 1}, now=2, idempotency_key="job-1")
    assert (replay.replayed, replay.resource["id"], twin.created) == (True, made["id"], 1)
    with pytest.raises(InvalidInput, match="already used for a different volume"):
        twin.create(Kind.VOLUME, {"size": 2}, now=2, idempotency_key="job-1")


def test_a_servers_agent_is_kept_by_its_record_and_an_older_record_has_none() -> None:
    cloud = Cloud(latency=1.0, failure_rate=0.0, rng=random.Random(1))
    server_id = cloud.create(Kind.SERVER, {"image": "cirros"}, now=0.0).resource["id"]
    res = cloud.resource(server_id)
    assert res is not None
    res.agent = ("http://converge:8004/v1/p", "t" * 48)
    record = json.loads(json.dumps(resource_record(res)))
    assert resource_from_record(record).agent == ("http://converge:8004/v1/p", "t" * 48)
    del record["agent"]  # written before agents existed
    assert resource_from_record(record).agent is None
