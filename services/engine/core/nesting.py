"""Nested stacks: the vocabulary a nested resource and its child stack share. Pure.

Where it sits: a resource whose type nests a stack — `OS::Heat::Stack`,
`OS::Heat::ResourceGroup`, `OS::Heat::AutoScalingGroup`, `OS::Heat::ResourceChain`,
a deployment group, or a template resource (a type the environment maps to a
template file) — is run by the engine, not by a worker (`services.engine.nested`):
its job becomes an operation of a child stack. Going down,
`core.child_goals.child_goal` computes that child's goal from the resource's
properties and the parent's environment and files (a group's members by
`core.groups`); coming back up, when the child's operation ends,
`core.child_attributes.child_attributes` computes what the resource takes from
it (the child's outputs; a group's from its members).

This module holds what both directions and the shells that run them need:
which types nest (`is_nested`, `NESTED_TYPES`, `MEMBER_GROUPS`), the
environment a child inherits (`child_environment`), the child's name
(`child_name`), what `resource_facade` returns in the child (`facade_of`), and
an AutoScalingGroup's state between operations (`ScalingState`).

A nested resource's recorded properties carry `GOAL_KEY`, a digest of what
else its child's goal depends on (the parent's resource registry, parameter
defaults and files; `goal_digest`), so a change there updates the child even
when the properties are equal, and an unchanged child is left alone.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from services.engine.core.chains import CHAIN_TYPE as CHAIN_TYPE
from services.engine.template.environment import is_template_reference
from shared.errors import InvalidInput
from shared.plugins.builtin.nested import AutoScalingGroup, ResourceGroup
from shared.plugins.builtin.nested import NestedStack as _NestedStack
from shared.plugins.builtin.software_deployment import DEPLOYMENT_GROUP_TYPES

STACK_TYPE = _NestedStack.type_name
GROUP_TYPE = ResourceGroup.type_name
SCALING_TYPE = AutoScalingGroup.type_name
DEPLOYMENT_GROUPS = frozenset(DEPLOYMENT_GROUP_TYPES)
NESTED_TYPES = frozenset({STACK_TYPE, GROUP_TYPE, SCALING_TYPE, CHAIN_TYPE, *DEPLOYMENT_GROUPS})
#: Types whose attributes come from their child's members (see `core.child_attributes`).
MEMBER_GROUPS = frozenset({GROUP_TYPE, SCALING_TYPE, CHAIN_TYPE, *DEPLOYMENT_GROUPS})
#: Outputs of an AutoScalingGroup's child template keeping its state (see `ScalingState`).
SCALING_STATE_OUTPUT = "converge_scaling_state"
#: A scaling policy's cooldown record (`core.scaling.Cooldown`), on its row's attributes.
COOLDOWN_ATTRIBUTE = "converge_cooldown"
#: Recorded with a nested resource's properties; never passed to the child.
GOAL_KEY = "converge:nested_goal"
#: The template version of a group's generated child template.
GROUP_TEMPLATE_VERSION = "2016-10-14"
_NAME_LIMIT = 200  # child stack names stay well under the API's limits


def is_nested(type_name: str) -> bool:
    """Whether resources of `type_name` are child stacks (run by the engine)."""
    return type_name in NESTED_TYPES or is_template_reference(type_name)


class NestedInvalid(InvalidInput):
    """A nested resource's properties cannot make a child stack."""


def child_environment(environment: Mapping[str, Any], resource_name: str | None = None) -> dict[str, Any]:
    """The part of the parent's environment a child inherits: its resource registry
    and parameter defaults (its `parameters` are the parent's own inputs). With
    `resource_name` (the resource owning the child), the registry's `resources`
    section becomes that resource's own section, as Heat hands it down
    (`child_resources`)."""
    out: dict[str, Any] = {}
    for section in ("resource_registry", "parameter_defaults"):
        value = environment.get(section)
        if isinstance(value, Mapping) and value:
            out[section] = dict(value)
    registry = out.get("resource_registry")
    if registry is not None and resource_name is not None:
        nested = child_resources(registry.get("resources"), resource_name)
        registry.pop("resources", None)
        if nested:
            registry["resources"] = nested
        if not registry:
            del out["resource_registry"]
    return out


def child_resources(resources: Any, resource_name: str) -> dict[str, Any]:
    """The `resources` section of the child stack of `resource_name`: the settings
    written under every entry whose name or fnmatch pattern matches it (the exact
    name's last, so they win), keeping the entries that are maps (settings of the
    child's resources, by name or pattern)."""
    if not isinstance(resources, Mapping):
        return {}
    matching = [
        v for k, v in resources.items() if k != resource_name and fnmatch.fnmatchcase(resource_name, k)
    ]
    if resource_name in resources:
        matching.append(resources[resource_name])
    out: dict[str, Any] = {}
    for settings in matching:
        if isinstance(settings, Mapping):
            out.update({k: v for k, v in settings.items() if isinstance(v, Mapping)})
    return out


def goal_digest(
    environment: Mapping[str, Any], files: Mapping[str, str], facade: Mapping[str, Any] | None = None
) -> str:
    """Digest of what a child's goal depends on besides the resource's properties (its
    `facade` too, when it says more than a resource without metadata or policies)."""
    depends: dict[str, Any] = {"environment": child_environment(environment), "files": dict(files)}
    if facade and dict(facade) != NO_FACADE:
        depends["facade"] = dict(facade)
    text = json.dumps(depends, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


#: What `resource_facade` returns for a resource with no metadata and default policies.
NO_FACADE: dict[str, Any] = {"metadata": {}, "deletion_policy": "Delete", "update_policy": {}}


def facade_of(
    metadata: Mapping[str, Any] | None, deletion_policy: str, update_policy: Mapping[str, Any]
) -> dict[str, Any]:
    """What `resource_facade` returns in the child stack of a resource with these
    (resolved) `metadata`, `deletion_policy` and `update_policy`."""
    return {
        "metadata": dict(metadata or {}),
        "deletion_policy": deletion_policy,
        "update_policy": dict(update_policy),
    }


def with_digest(properties: Mapping[str, Any], digest: str) -> dict[str, Any]:
    return {**properties, GOAL_KEY: digest}


def without_digest(properties: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in properties.items() if k != GOAL_KEY}


def child_name(parent_name: str, resource_name: str, child_id: str) -> str:
    """`{parent}-{resource}-{short id}`, as Heat names nested stacks."""
    name = f"{parent_name}-{resource_name}-{child_id.replace('-', '')[:12]}"
    return name if len(name) <= _NAME_LIMIT else name[-_NAME_LIMIT:].lstrip("-_.") or name[-12:]


@dataclass(frozen=True)
class ScalingState:
    """What an AutoScalingGroup keeps between operations (an output of its child
    template, so it comes back with the group's attributes): its members oldest
    first, the next unused member index, and the desired_capacity its size last
    came from."""

    members: tuple[str, ...]
    next_index: int
    desired: int | None
    size: int  # the size last decided (a scaling signal sets it before the child follows)
    cooldown: Mapping[str, Any] | None = None  # the group's cooldown record (`core.scaling.Cooldown`)

    def as_dict(self) -> dict[str, Any]:
        return {
            "members": list(self.members),
            "next_index": self.next_index,
            "desired": self.desired,
            "size": self.size,
            "cooldown": dict(self.cooldown) if self.cooldown is not None else None,
        }

    @classmethod
    def read(cls, raw: Any) -> ScalingState | None:
        """The state in `raw` (None when there is none or it is unreadable)."""
        if not isinstance(raw, Mapping):
            return None
        members, index, desired = raw.get("members"), raw.get("next_index"), raw.get("desired")
        if not isinstance(members, list) or not isinstance(index, int) or isinstance(index, bool):
            return None
        if desired is not None and (not isinstance(desired, int) or isinstance(desired, bool)):
            return None
        size = raw.get("size", len(members))
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            return None
        cooldown = raw.get("cooldown")
        return cls(
            tuple(str(m) for m in members),
            index,
            desired,
            size,
            dict(cooldown) if isinstance(cooldown, Mapping) else None,
        )


def scaling_state(attributes: Mapping[str, Any]) -> ScalingState | None:
    """An AutoScalingGroup's state, from its recorded attributes."""
    return ScalingState.read(attributes.get(SCALING_STATE_OUTPUT))
