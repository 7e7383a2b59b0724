"""Proves the sandbox's update rules: which field changes apply in place, which replace,
and that the Sandbox::* schemas the engine diffs with say the same. Pure; nothing faked."""

from __future__ import annotations

from typing import Any

import pytest

from services.sandbox.provider import (
    SandboxNetwork,
    SandboxResource,
    SandboxServer,
    SandboxSubnet,
    SandboxThing,
    SandboxVolume,
    SandboxVolumeAttachment,
)
from services.sandbox.specs import SPECS, Kind, Rule, parse_spec, replacing_fields, rule, rule_table
from shared.errors import InvalidInput
from shared.plugins.registry import type_schema

TYPES: list[type[SandboxResource]] = [
    SandboxNetwork,
    SandboxSubnet,
    SandboxServer,
    SandboxVolume,
    SandboxVolumeAttachment,
    SandboxThing,
]


@pytest.mark.parametrize(
    ("kind", "field", "expected"),
    [
        (Kind.NETWORK, "name", Rule.IN_PLACE),
        (Kind.SUBNET, "network", Rule.REPLACE),
        (Kind.SUBNET, "cidr", Rule.REPLACE),
        (Kind.SUBNET, "name", Rule.IN_PLACE),
        (Kind.SUBNET, "dns_nameservers", Rule.IN_PLACE),
        (Kind.SERVER, "image", Rule.REPLACE),
        (Kind.SERVER, "networks", Rule.REPLACE),
        (Kind.SERVER, "name", Rule.IN_PLACE),
        (Kind.SERVER, "metadata", Rule.IN_PLACE),
        (Kind.SERVER, "flavor", Rule.IN_PLACE),
        (Kind.VOLUME, "size", Rule.GROW_ONLY),
        (Kind.VOLUME, "name", Rule.IN_PLACE),
        (Kind.VOLUME_ATTACHMENT, "server", Rule.IN_PLACE),
        (Kind.VOLUME_ATTACHMENT, "volume", Rule.IN_PLACE),
        (Kind.THING, "data", Rule.IN_PLACE),
        (Kind.THING, "fixed", Rule.REPLACE),
    ],
)
def test_each_field_has_its_rule(kind: Kind, field: str, expected: Rule) -> None:
    assert rule(kind, field) is expected


SERVER = {"image": "cirros", "networks": ["n1"]}


@pytest.mark.parametrize(
    ("kind", "old", "new", "replacing"),
    [
        (Kind.SERVER, SERVER, {**SERVER, "name": "web-1", "metadata": {"a": "b"}}, []),
        (Kind.SERVER, SERVER, {**SERVER, "flavor": "m1.large"}, []),
        (Kind.SERVER, SERVER, {**SERVER, "image": "ubuntu"}, ["image"]),
        (Kind.SERVER, SERVER, {**SERVER, "networks": ["n1", "n2"], "name": "x"}, ["networks"]),
        (Kind.VOLUME, {"size": 10}, {"size": 20}, []),
        (Kind.VOLUME, {"size": 10}, {"size": 5}, ["size"]),
        (Kind.VOLUME, {"size": 10}, {"size": 10, "name": "data"}, []),
        (
            Kind.SUBNET,
            {"network": "n", "cidr": "10.0.0.0/24"},
            {"network": "n", "cidr": "10.1.0.0/24"},
            ["cidr"],
        ),
        (Kind.THING, {"data": {"a": 1}}, {"data": {"a": 2}}, []),
        (Kind.THING, {"fixed": {"a": 1}}, {"fixed": {"a": 2}}, ["fixed"]),
    ],
)
def test_replacing_fields(kind: Kind, old: dict[str, Any], new: dict[str, Any], replacing: list[str]) -> None:
    assert replacing_fields(kind, parse_spec(kind, old), parse_spec(kind, new)) == replacing


@pytest.mark.parametrize("cls", TYPES, ids=lambda c: c.type_name)
def test_the_resource_types_declare_the_clouds_own_rules(cls: type[SandboxResource]) -> None:
    assert cls.properties is SPECS[cls.kind]
    schema = type_schema(cls)["properties"]
    for field, field_rule in rule_table()[cls.kind].items():
        assert schema[field]["update_allowed"] is (field_rule is not Rule.REPLACE), field


@pytest.mark.parametrize(
    ("kind", "body", "message"),
    [
        (Kind.SERVER, {"networks": []}, "server: image: Field required"),
        (Kind.SERVER, {"image": "x", "flavor": "huge"}, "server: flavor: Input should be 'm1.tiny'"),
        (Kind.SERVER, {"image": "x", "networks": [""]}, "server: networks.0: String should have at least 1"),
        (
            Kind.SUBNET,
            {"network": "n", "cidr": "10.0.0.1/24"},
            "cidr: not a network address in CIDR notation",
        ),
        (Kind.VOLUME, {"size": 0}, "volume: size: Input should be greater than or equal to 1"),
        (Kind.VOLUME, {"size": 1, "colour": "red"}, "volume: colour: Extra inputs are not permitted"),
        (Kind.THING, [], "the body of a thing must be a JSON object"),
    ],
)
def test_invalid_bodies_name_the_field(kind: Kind, body: Any, message: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_spec(kind, body)
    assert message in str(caught.value)
