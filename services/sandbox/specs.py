"""What each sandbox resource kind is made of, and how each field may change.

Where it sits: the single source of truth shared by the sandbox cloud
(`model.py` validates request bodies with these models and refuses changes
the rules forbid) and the `Sandbox::*` resource types (`provider.py` uses the
same models as their property schemas, so the engine's replace-or-update
decision and the cloud's own rules cannot disagree). Pure: no I/O.

Update rules, per field (`rule`):
- IN_PLACE: applied by PATCH, the resource keeps its id;
- REPLACE: cannot change; a new resource must be created (the schema marks
  these `update=REPLACE`, so the engine replaces without asking);
- GROW_ONLY: in place when the value grows, replacement when it shrinks
  (a volume's size); the type's `update` raises ReplacementNeeded.
Fields in `REBUILD_FIELDS` send the resource back through BUILD when they
change (a resize, an extend, a re-attach); other in-place changes are
immediate.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, StringConstraints, ValidationError

from shared.errors import InvalidInput
from shared.plugins.base import Properties, UpdateRule, prop, update_rule


class Kind(StrEnum):
    NETWORK = "network"
    SUBNET = "subnet"
    SERVER = "server"
    VOLUME = "volume"
    VOLUME_ATTACHMENT = "volume_attachment"
    THING = "thing"

    @property
    def collection(self) -> str:
        """The URL path segment of this kind's collection, e.g. `servers`."""
        return f"{self.value}s"

    @classmethod
    def from_collection(cls, name: str) -> Kind | None:
        return next((kind for kind in cls if kind.collection == name), None)


class Status(StrEnum):
    BUILD = "BUILD"  # being created or rebuilt; ACTIVE (or ERROR) after the build time
    ACTIVE = "ACTIVE"
    ERROR = "ERROR"


class Rule(StrEnum):
    IN_PLACE = "in_place"
    REPLACE = "replace"
    GROW_ONLY = "grow_only"


FLAVORS = ("m1.tiny", "m1.small", "m1.medium", "m1.large", "m1.xlarge")
Flavor = Literal["m1.tiny", "m1.small", "m1.medium", "m1.large", "m1.xlarge"]


def _cidr(value: str) -> str:
    try:
        return str(ipaddress.ip_network(value, strict=True))
    except ValueError as exc:
        raise ValueError(f"not a network address in CIDR notation (e.g. 10.0.0.0/24): {exc}") from exc


Cidr = Annotated[str, AfterValidator(_cidr)]
ResourceRef = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class NetworkSpec(Properties):
    name: str = prop("", description="Display name.")


class SubnetSpec(Properties):
    network: ResourceRef = prop(
        description="Id of the network the subnet belongs to (it must exist).",
        update=UpdateRule.REPLACE,
    )
    cidr: Cidr = prop(
        description="Address range, e.g. 10.0.0.0/24; servers get addresses from it.",
        update=UpdateRule.REPLACE,
    )
    name: str = prop("", description="Display name.")
    dns_nameservers: list[str] = prop([], description="DNS servers handed to servers on the subnet.")


class ServerSpec(Properties):
    name: str = prop("", description="Display name (changes in place).")
    image: str = prop(
        description="Image to boot; a new image replaces the server.", update=UpdateRule.REPLACE, min_length=1
    )
    flavor: Flavor = prop(
        "m1.small", description="Size; a change resizes the server in place (it rebuilds for a while)."
    )
    networks: list[ResourceRef] = prop(
        [],
        description="Ids of the networks to plug into (they must exist); each gets an address from "
        "the network's first subnet. A change replaces the server.",
        update=UpdateRule.REPLACE,
    )
    metadata: dict[str, str] = prop({}, description="Free-form key/value pairs (change in place).")


class VolumeSpec(Properties):
    size: int = prop(
        description="Size in GiB; grows in place (extend), shrinking replaces the volume.", ge=1, le=16384
    )
    name: str = prop("", description="Display name.")


class VolumeAttachmentSpec(Properties):
    server: ResourceRef = prop(
        description="Id of the server (it must exist); a change re-attaches the volume in place."
    )
    volume: ResourceRef = prop(
        description="Id of the volume (it must exist and not be attached elsewhere); a change "
        "re-attaches in place."
    )
    mountpoint: str = prop("/dev/vdb", description="Device name on the server.")


class ThingSpec(Properties):
    name: str = prop("", description="Display name.")
    data: dict[str, Any] = prop({}, description="Free-form JSON object; a change rebuilds the thing.")
    fixed: dict[str, Any] = prop(
        {}, description="Free-form JSON object whose change replaces the thing.", update=UpdateRule.REPLACE
    )
    build_seconds: float | None = prop(
        None,
        description="Seconds in BUILD on create and rebuild; unset = the sandbox's latency.",
        ge=0,
        le=3600,
    )
    fail: bool = prop(False, description="End every build in ERROR (to make failures on purpose).")


SPECS: Mapping[Kind, type[Properties]] = {
    Kind.NETWORK: NetworkSpec,
    Kind.SUBNET: SubnetSpec,
    Kind.SERVER: ServerSpec,
    Kind.VOLUME: VolumeSpec,
    Kind.VOLUME_ATTACHMENT: VolumeAttachmentSpec,
    Kind.THING: ThingSpec,
}

GROW_ONLY_FIELDS: Mapping[Kind, frozenset[str]] = {Kind.VOLUME: frozenset({"size"})}

REBUILD_FIELDS: Mapping[Kind, frozenset[str]] = {
    Kind.SERVER: frozenset({"flavor"}),
    Kind.VOLUME: frozenset({"size"}),
    Kind.VOLUME_ATTACHMENT: frozenset({"server", "volume", "mountpoint"}),
    Kind.THING: frozenset({"data", "build_seconds", "fail"}),
}

#: Fields holding the id of another resource, and the kind it must be.
REFERENCES: Mapping[Kind, Mapping[str, Kind]] = {
    Kind.SUBNET: {"network": Kind.NETWORK},
    Kind.SERVER: {"networks": Kind.NETWORK},
    Kind.VOLUME_ATTACHMENT: {"server": Kind.SERVER, "volume": Kind.VOLUME},
}


def rule(kind: Kind, field: str) -> Rule:
    """How a change of `field` of a `kind` applies."""
    if field in GROW_ONLY_FIELDS.get(kind, frozenset()):
        return Rule.GROW_ONLY
    if update_rule(SPECS[kind], field) is UpdateRule.REPLACE:
        return Rule.REPLACE
    return Rule.IN_PLACE


def rule_table() -> dict[Kind, dict[str, Rule]]:
    """Every kind's fields and their rules (documentation and tests)."""
    return {kind: {name: rule(kind, name) for name in spec.model_fields} for kind, spec in SPECS.items()}


def changed_fields(old: Properties, new: Properties) -> list[str]:
    """Fields whose value differs, in declaration order."""
    return [name for name in type(new).model_fields if getattr(old, name) != getattr(new, name)]


def replacing_fields(kind: Kind, old: Properties, new: Properties) -> list[str]:
    """Changed fields that cannot be applied in place (replace-only, or a grow-only shrink)."""
    out: list[str] = []
    for name in changed_fields(old, new):
        field_rule = rule(kind, name)
        if field_rule is Rule.REPLACE or (
            field_rule is Rule.GROW_ONLY and getattr(new, name) < getattr(old, name)
        ):
            out.append(name)
    return out


def parse_spec(kind: Kind, body: Any) -> Properties:
    """Validate a request body as `kind`'s spec; InvalidInput names the field."""
    if not isinstance(body, Mapping):
        raise InvalidInput(f"the body of a {kind.value} must be a JSON object")
    try:
        return SPECS[kind].model_validate(dict(body))
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False)[:5]:
            where = ".".join(str(part) for part in error["loc"]) or kind.value
            message = str(error["msg"]).removeprefix("Value error, ")
            problems.append(f"{where}: {message}")
        raise InvalidInput("; ".join(problems), path=kind.value) from exc
