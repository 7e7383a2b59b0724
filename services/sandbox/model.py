"""The sandbox cloud's state and rules: resources, builds, integrity, idempotency.

Where it sits: `SandboxService` (service.py) owns one `Cloud`, calls it with
the current time for every request and every timer tick, and publishes the
`Change`s each call returns. Pure: no I/O, no clock, no global randomness —
time comes in as `now`, randomness (ids, simulated failures) from an
injected `random.Random`, so a seed replays a run exactly.

Behaviour:
- create: validate the body (`specs.parse_spec`), check references exist,
  allocate addresses, start a build: BUILD, then ACTIVE (or ERROR) once the
  build time has passed (`advance`). A create carrying an idempotency key
  seen before returns the resource it made then, and creates nothing.
- update: merge the patch into the spec; replace-only fields and shrinking
  grow-only fields are refused (ConflictError); rebuild fields start a new
  build, other changes apply at once.
- delete: immediate (the resource is gone when the call returns); refused
  with ConflictError while other resources still use it (a network with
  subnets or servers, a subnet with addresses in use, a server or volume
  still attached).
- break_: out-of-band failure, straight to ERROR.
"""

from __future__ import annotations

import heapq
import ipaddress
import json
import random
import uuid
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from services.sandbox.addresses import AddressPool, Port, allocate_ports
from services.sandbox.specs import (
    REBUILD_FIELDS,
    REFERENCES,
    Kind,
    ServerSpec,
    Status,
    SubnetSpec,
    ThingSpec,
    VolumeAttachmentSpec,
    changed_fields,
    parse_spec,
    replacing_fields,
)
from shared.errors import ConflictError, InvalidInput, NotFound
from shared.notifications import NotificationEvent
from shared.plugins.base import Properties

#: Idempotency keys remembered (oldest forgotten first), so memory stays bounded.
IDEMPOTENCY_KEYS_KEPT = 100_000
#: Users named in a refused delete's message (the rest are counted).
USERS_NAMED = 5
DELETED = "DELETED"

P = TypeVar("P", bound=Properties)


@dataclass(frozen=True)
class Build:
    """A build in progress: it ends at `ready_at`, in ERROR when `failure` is set."""

    ready_at: float
    failure: str
    generation: int


@dataclass
class Resource:
    id: str
    kind: Kind
    spec: Properties
    status: Status
    reason: str
    created_at: float
    updated_at: float
    seq: int = 0  # creation order, for stable listings and messages
    ports: tuple[Port, ...] = ()
    build: Build | None = None
    agent: tuple[str, str] | None = None  # a server's configuration agent: (api, token), see agent.py


@dataclass(frozen=True)
class Change:
    """One change of one resource, as a notification reports it."""

    kind: Kind
    physical_id: str
    event: NotificationEvent
    status: str
    properties: Mapping[str, Any]
    reason: str
    at: float


@dataclass(frozen=True)
class KeyRecord:
    """An idempotency key the cloud has seen: what it created, for which request."""

    kind: Kind
    key: str
    fingerprint: str  # the request's spec, so a reuse for another request is refused
    resource_id: str


@dataclass(frozen=True)
class Created:
    resource: dict[str, Any]
    replayed: bool  # True: the idempotency key was seen before; nothing was created
    changes: tuple[Change, ...]


def _fingerprint(spec: Properties) -> str:
    return json.dumps(spec.model_dump(mode="json"), sort_keys=True)


class Cloud:
    """Every resource of one sandbox, in memory."""

    def __init__(self, *, latency: float, failure_rate: float, rng: random.Random) -> None:
        self._latency = latency
        self._failure_rate = failure_rate
        self._rng = rng
        self._resources: dict[str, Resource] = {}
        self._users: dict[str, set[str]] = {}  # id -> ids of the resources using it
        self._pools: dict[str, AddressPool] = {}  # subnet id -> its addresses
        self._subnets: dict[str, list[str]] = {}  # network id -> its subnets, oldest first
        self._keys: OrderedDict[tuple[Kind, str], tuple[str, str]] = OrderedDict()
        self._timers: list[tuple[float, int, str]] = []  # (ready_at, generation, id)
        self._generation = 0
        self._created = 0
        self.counts: Counter[Kind] = Counter()

    # -- reading -------------------------------------------------------------

    def get(self, kind: Kind, resource_id: str) -> dict[str, Any]:
        return self.view(self._find(kind, resource_id))

    def list_kind(self, kind: Kind) -> list[dict[str, Any]]:
        return [self.view(r) for r in self._resources.values() if r.kind is kind]

    def inventory(self) -> list[dict[str, Any]]:
        return [self.view(r) for r in self._resources.values()]

    def view(self, res: Resource) -> dict[str, Any]:
        """The resource as the API shows it: identity, status, spec, derived values."""
        out: dict[str, Any] = {"id": res.id, "kind": res.kind.value, "status": res.status.value}
        out["status_reason"] = res.reason
        out.update(res.spec.model_dump(mode="json"))
        if res.kind is Kind.NETWORK:
            out["subnets"] = list(self._subnets.get(res.id, ()))
        elif res.kind is Kind.SUBNET:
            out["gateway_ip"] = self._pools[res.id].gateway
        elif res.kind is Kind.SERVER:
            addresses: dict[str, list[str]] = {}
            for port in res.ports:
                addresses.setdefault(port.network, []).append(port.address)
            out["addresses"] = addresses
            out["first_address"] = res.ports[0].address if res.ports else None
            out["volumes"] = [_spec(a, VolumeAttachmentSpec).volume for a in self._attachments(res.id)]
        elif res.kind is Kind.VOLUME:
            attachment = next(iter(self._attachments(res.id)), None)
            out["attached_to"] = _spec(attachment, VolumeAttachmentSpec).server if attachment else None
            out["attachment"] = attachment.id if attachment else None
        out["created_at"] = res.created_at
        out["updated_at"] = res.updated_at
        return out

    def _attachments(self, server_or_volume: str) -> list[Resource]:
        users = (
            self._resources[u] for u in sorted(self._users.get(server_or_volume, ()), key=self._created_order)
        )
        return [u for u in users if u.kind is Kind.VOLUME_ATTACHMENT]

    def _find(self, kind: Kind, resource_id: str) -> Resource:
        res = self._resources.get(resource_id)
        if res is None or res.kind is not kind:
            raise NotFound(f"no {kind.value} with id {resource_id!r}")
        return res

    # -- its state, to keep and restore (records.py, state.py) ------------------

    @property
    def created(self) -> int:
        """Resources created since the cloud began (an idempotent replay creates none)."""
        return self._created

    @property
    def generation(self) -> int:
        """Builds started since the cloud began (each build's timer is its generation)."""
        return self._generation

    def resource(self, resource_id: str) -> Resource | None:
        """The live resource, as the cloud holds it (None once deleted)."""
        return self._resources.get(resource_id)

    def key(self, kind: Kind, key: str) -> KeyRecord | None:
        seen = self._keys.get((kind, key))
        return KeyRecord(kind, key, *seen) if seen is not None else None

    @classmethod
    def restore(
        cls,
        resources: Iterable[Resource],
        keys: Iterable[KeyRecord],
        *,
        created: int,
        generation: int,
        latency: float,
        failure_rate: float,
        rng: random.Random,
    ) -> Cloud:
        """The cloud these resources and keys (oldest first) make: who uses what, the
        networks' subnets, the address pools, the build timers and counts rebuilt."""
        cloud = cls(latency=latency, failure_rate=failure_rate, rng=rng)
        for res in sorted(resources, key=lambda r: r.seq):
            cloud._resources[res.id] = res
            cloud._link(res)
            cloud.counts[res.kind] += 1
            if res.build is not None:
                heapq.heappush(cloud._timers, (res.build.ready_at, res.build.generation, res.id))
            cloud._created = max(cloud._created, res.seq)
            if res.build is not None:
                cloud._generation = max(cloud._generation, res.build.generation)
        owners: dict[str, dict[str, str]] = {subnet: {} for subnet in cloud._pools}
        for res in cloud._resources.values():
            for port in res.ports:
                owners.setdefault(port.subnet, {})[port.address] = res.id
        for subnet, pool in list(cloud._pools.items()):
            cloud._pools[subnet] = AddressPool.restored(pool.network, owners[subnet])
        for record in keys:
            cloud._remember(record.kind, record.key, record.fingerprint, record.resource_id)
        cloud._created = max(cloud._created, created)
        cloud._generation = max(cloud._generation, generation)
        return cloud

    # -- changing ------------------------------------------------------------

    def create(self, kind: Kind, body: Any, *, now: float, idempotency_key: str | None = None) -> Created:
        spec = parse_spec(kind, body)
        if idempotency_key:
            replay = self._replay(kind, idempotency_key, spec)
            if replay is not None:
                return Created(self.view(replay), True, ())
        self._check_references(kind, spec, self_id=None)
        res = Resource(self._new_id(), kind, spec, Status.BUILD, "", now, now, seq=self._created + 1)
        if kind is Kind.SERVER:
            res.ports = allocate_ports(res.id, _spec(res, ServerSpec).networks, self._subnets, self._pools)
        self._created += 1  # counted once nothing can refuse it any more
        self._resources[res.id] = res
        self._link(res)
        self.counts[kind] += 1
        if idempotency_key:
            self._remember(kind, idempotency_key, _fingerprint(spec), res.id)
        self._start_build(res, now)
        changes = [self._change(res, NotificationEvent.CREATED, now), *self.advance(now)]
        return Created(self.view(res), False, tuple(changes))

    def update(
        self, kind: Kind, resource_id: str, patch: Any, *, now: float
    ) -> tuple[dict[str, Any], tuple[Change, ...]]:
        res = self._find(kind, resource_id)
        if not isinstance(patch, Mapping):
            raise InvalidInput(f"the body of a {kind.value} update must be a JSON object")
        merged = res.spec.model_dump()
        for name, value in patch.items():
            if value is None:
                merged.pop(name, None)  # JSON merge patch: null resets the field to its default
            else:
                merged[name] = value
        spec = parse_spec(kind, merged)
        blocked = replacing_fields(kind, res.spec, spec)
        if blocked:
            raise ConflictError(
                f"{kind.value} {res.id}: {', '.join(blocked)} cannot change in place "
                f"({_describe_blocked(res.spec, spec, blocked)}); create a new {kind.value} instead"
            )
        changed = changed_fields(res.spec, spec)
        if not changed:
            return self.view(res), ()
        self._check_references(kind, spec, self_id=res.id)
        self._unlink(res)
        res.spec = spec
        res.updated_at = now
        self._link(res)
        if set(changed) & REBUILD_FIELDS.get(kind, frozenset()):
            self._start_build(res, now)
        changes = [self._change(res, NotificationEvent.UPDATED, now), *self.advance(now)]
        return self.view(res), tuple(changes)

    def delete(self, kind: Kind, resource_id: str, *, now: float) -> tuple[Change, ...]:
        res = self._find(kind, resource_id)
        users = sorted(self._users.get(res.id, ()), key=self._created_order)
        if users:
            named = ", ".join(_describe_user(self._resources[u]) for u in users[:USERS_NAMED])
            more = f" and {len(users) - USERS_NAMED} more" if len(users) > USERS_NAMED else ""
            raise ConflictError(
                f"cannot delete {kind.value} {res.id}: it is still used by {named}{more}; "
                "delete or change those first"
            )
        for port in res.ports:
            self._pools[port.subnet].release(port.address)
        self._unlink(res)
        if isinstance(res.spec, SubnetSpec):
            del self._pools[res.id]
            self._subnets[res.spec.network].remove(res.id)
            if not self._subnets[res.spec.network]:
                del self._subnets[res.spec.network]
        del self._resources[res.id]
        self.counts[kind] -= 1
        return (Change(kind, res.id, NotificationEvent.DELETED, DELETED, {}, "", now),)

    def break_(
        self, kind: Kind, resource_id: str, reason: str, *, now: float
    ) -> tuple[dict[str, Any], tuple[Change, ...]]:
        """Put a resource into ERROR behind Converge's back (drift on demand)."""
        res = self._find(kind, resource_id)
        res.status = Status.ERROR
        res.reason = reason or "broken out of band"
        res.build = None
        res.updated_at = now
        return self.view(res), (self._change(res, NotificationEvent.STATUS_CHANGED, now),)

    # -- time ----------------------------------------------------------------

    def advance(self, now: float) -> list[Change]:
        """Finish every build whose time has come; the status changes, oldest first."""
        changes: list[Change] = []
        while self._timers and self._timers[0][0] <= now:
            ready_at, generation, resource_id = heapq.heappop(self._timers)
            res = self._resources.get(resource_id)
            if res is None or res.build is None or res.build.generation != generation:
                continue  # deleted, broken or rebuilt since
            res.status = Status.ERROR if res.build.failure else Status.ACTIVE
            res.reason = res.build.failure
            res.build = None
            res.updated_at = max(res.updated_at, ready_at)
            changes.append(self._change(res, NotificationEvent.STATUS_CHANGED, ready_at))
        return changes

    def next_due(self) -> float | None:
        """When the next build ends, or None when nothing is building."""
        while self._timers:
            _, generation, resource_id = self._timers[0]
            res = self._resources.get(resource_id)
            if res is not None and res.build is not None and res.build.generation == generation:
                return self._timers[0][0]
            heapq.heappop(self._timers)
        return None

    # -- internals -----------------------------------------------------------

    def _new_id(self) -> str:
        return str(uuid.UUID(int=self._rng.getrandbits(128), version=4))

    def _start_build(self, res: Resource, now: float) -> None:
        seconds = self._latency
        failure = ""
        if isinstance(res.spec, ThingSpec):
            if res.spec.build_seconds is not None:
                seconds = res.spec.build_seconds
            if res.spec.fail:
                failure = "the thing was asked to fail (fail: true)"
        if not failure and self._failure_rate > 0 and self._rng.random() < self._failure_rate:
            failure = f"simulated failure (failure rate {self._failure_rate:g})"
        self._generation += 1
        res.status = Status.BUILD
        res.reason = ""
        res.build = Build(now + seconds, failure, self._generation)
        heapq.heappush(self._timers, (res.build.ready_at, self._generation, res.id))

    def _change(self, res: Resource, event: NotificationEvent, at: float) -> Change:
        return Change(
            res.kind, res.id, event, res.status.value, res.spec.model_dump(mode="json"), res.reason, at
        )

    def _replay(self, kind: Kind, key: str, spec: Properties) -> Resource | None:
        seen = self._keys.get((kind, key))
        if seen is None:
            return None
        fingerprint, resource_id = seen
        if fingerprint != _fingerprint(spec):
            raise InvalidInput(f"Idempotency-Key {key!r} was already used for a different {kind.value}")
        res = self._resources.get(resource_id)
        if res is None:
            raise ConflictError(
                f"Idempotency-Key {key!r} already created {kind.value} {resource_id}, "
                "which has since been deleted"
            )
        return res

    def _remember(self, kind: Kind, key: str, fingerprint: str, resource_id: str) -> None:
        self._keys[(kind, key)] = (fingerprint, resource_id)
        while len(self._keys) > IDEMPOTENCY_KEYS_KEPT:
            self._keys.popitem(last=False)

    def _references(self, kind: Kind, spec: Properties) -> list[str]:
        out: list[str] = []
        for name in REFERENCES.get(kind, {}):
            value = getattr(spec, name)
            out.extend(value if isinstance(value, list) else [value])
        return out

    def _check_references(self, kind: Kind, spec: Properties, *, self_id: str | None) -> None:
        for name, target in REFERENCES.get(kind, {}).items():
            value = getattr(spec, name)
            ids = value if isinstance(value, list) else [value]
            if len(set(ids)) != len(ids):
                raise InvalidInput(f"lists {target.value} ids more than once", path=f"{kind.value}.{name}")
            for ref in ids:
                found = self._resources.get(ref)
                if found is None or found.kind is not target:
                    raise InvalidInput(f"no {target.value} with id {ref!r}", path=f"{kind.value}.{name}")
        if isinstance(spec, VolumeAttachmentSpec):
            self._check_attachable(spec, self_id)

    def _check_attachable(self, spec: VolumeAttachmentSpec, self_id: str | None) -> None:
        for other in self._attachments(spec.volume):
            if other.id != self_id:
                server = _spec(other, VolumeAttachmentSpec).server
                raise ConflictError(
                    f"volume {spec.volume} is already attached to server {server} "
                    f"(volume_attachment {other.id})"
                )
        for other in self._attachments(spec.server):
            if other.id != self_id and _spec(other, VolumeAttachmentSpec).mountpoint == spec.mountpoint:
                raise ConflictError(
                    f"server {spec.server} already has a volume at {spec.mountpoint} "
                    f"(volume_attachment {other.id})"
                )

    def _created_order(self, resource_id: str) -> int:
        return self._resources[resource_id].seq

    def _link(self, res: Resource) -> None:
        """Index what `res` uses (the references of its spec, the subnets of its addresses)."""
        if isinstance(res.spec, SubnetSpec) and res.id not in self._pools:
            self._pools[res.id] = AddressPool(ipaddress.ip_network(res.spec.cidr))
            self._subnets.setdefault(res.spec.network, []).append(res.id)
        for ref in [*self._references(res.kind, res.spec), *(p.subnet for p in res.ports)]:
            self._users.setdefault(ref, set()).add(res.id)

    def _unlink(self, res: Resource) -> None:
        """Undo the use index of `_link` (a subnet's addresses go with the subnet, in `delete`)."""
        for ref in [*self._references(res.kind, res.spec), *(p.subnet for p in res.ports)]:
            users = self._users.get(ref)
            if users is not None:
                users.discard(res.id)
                if not users:
                    del self._users[ref]


def _spec(res: Resource, kind: type[P]) -> P:
    if not isinstance(res.spec, kind):
        raise TypeError(f"{res.kind.value} {res.id} has a {type(res.spec).__name__}, not a {kind.__name__}")
    return res.spec


def _describe_user(res: Resource) -> str:
    if isinstance(res.spec, VolumeAttachmentSpec):
        return f"volume_attachment {res.id} (volume {res.spec.volume} on server {res.spec.server})"
    return f"{res.kind.value} {res.id}"


def _describe_blocked(old: Properties, new: Properties, names: list[str]) -> str:
    return ", ".join(f"{n}: {getattr(old, n)!r} -> {getattr(new, n)!r}" for n in names)
