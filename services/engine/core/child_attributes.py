"""What a nested resource takes back from its child stack. Pure.

Where it sits: when a child stack's operation ends, `services.engine.nested`
reads the child's outputs (and, for a group, its members' reference ids and
attributes) and records what `child_attributes` returns as the nested
resource's attributes:

- `OS::Heat::Stack`: the child's outputs, each as an attribute and together as
  `outputs` and `outputs_list`, and `stack_name`;
- a template resource: its outputs, `OS::stack_id` the child's id unless an
  output sets it;
- `OS::Heat::ResourceGroup`: `refs`, `refs_map`, `attributes`, `outputs`,
  `removed_rsrc_list`, `resource.<n>` and every member attribute as a list
  (`group_attributes`); `GroupAttributes` reads `resource.<n>.<name>` through
  from member n's attributes;
- `OS::Heat::ResourceChain`: a group's (`core.chains.chain_attributes`);
- a deployment group: maps of member name -> the member's `deploy_stdouts`,
  `deploy_stderrs`, `deploy_status_codes` and every output;
- `OS::Heat::AutoScalingGroup`: its members' attributes oldest first, and the
  state its next goal starts from (`scaling_attributes`,
  `core.nesting.ScalingState`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from services.engine.core.chains import chain_attributes
from services.engine.core.nesting import (
    CHAIN_TYPE,
    DEPLOYMENT_GROUPS,
    GROUP_TYPE,
    SCALING_STATE_OUTPUT,
    SCALING_TYPE,
    STACK_TYPE,
    ScalingState,
)
from services.engine.template import OutputValue
from services.engine.template.expr import MemberAttributes
from shared.plugins.builtin.software_deployment import group_attributes as deployment_group_attributes


@dataclass(frozen=True)
class Member:
    name: str
    reference_id: str | None
    attributes: Mapping[str, Any]


def _index(name: str) -> tuple[int, str]:
    return (int(name), name) if name.isdigit() else (1 << 62, name)


def group_attributes(members: Sequence[Member], removed: Sequence[str]) -> dict[str, Any]:
    """A group's attributes from its members (see `ResourceGroup.attributes`)."""
    ordered = sorted(members, key=lambda m: _index(m.name))
    keys = list(dict.fromkeys(k for m in ordered for k in m.attributes))
    out: dict[str, Any] = {
        "refs": [m.reference_id for m in ordered],
        "refs_map": {m.name: m.reference_id for m in ordered},
        "attributes": {k: {m.name: m.attributes.get(k) for m in ordered} for k in keys},
        "outputs": {m.name: dict(m.attributes) for m in ordered},
        "removed_rsrc_list": list(removed),
    }
    for m in ordered:
        out[f"resource.{m.name}"] = m.reference_id  # Heat's get_attr [group, resource.<n>]
    for key in keys:
        out.setdefault(key, [m.attributes.get(key) for m in ordered])
    return out


class GroupAttributes(MemberAttributes):
    """A group's stored attributes, plus `resource.<n>.<name>` read through from
    member n's attributes (its entry in `outputs`)."""

    def __init__(self, stored: Mapping[str, Any]) -> None:
        self._stored = stored

    def __getitem__(self, name: str) -> Any:
        if name in self._stored:
            return self._stored[name]
        if name.startswith("resource."):
            index, _, attribute = name[len("resource.") :].partition(".")
            members = self._stored.get("outputs")
            member = members.get(index) if isinstance(members, Mapping) else None
            if attribute and isinstance(member, Mapping) and attribute in member:
                return member[attribute]
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._stored)

    def __len__(self) -> int:
        return len(self._stored)


def scaling_attributes(members: Sequence[Member], state: ScalingState | None) -> dict[str, Any]:
    """An AutoScalingGroup's attributes from its members, oldest first (see
    `AutoScalingGroup.attributes`), and its state."""
    order = {name: i for i, name in enumerate(state.members if state is not None else ())}
    ordered = sorted(members, key=lambda m: (order.get(m.name, len(order)), _index(m.name)))
    keys = list(dict.fromkeys(k for m in ordered for k in m.attributes))
    return {
        "current_size": len(ordered),
        "refs": [m.reference_id for m in ordered],
        "refs_map": {m.name: m.reference_id for m in ordered},
        "outputs": {k: {m.name: m.attributes.get(k) for m in ordered} for k in keys},
        "outputs_list": {k: [m.attributes.get(k) for m in ordered] for k in keys},
        SCALING_STATE_OUTPUT: state.as_dict() if state is not None else None,
    }


def output_values(outputs: Mapping[str, OutputValue]) -> dict[str, Any]:
    return {k: v.value for k, v in outputs.items()}


def child_attributes(
    type_name: str,
    *,
    child_id: str,
    child_name: str,
    outputs: Mapping[str, OutputValue],
    members: Sequence[Member] = (),
) -> dict[str, Any]:
    """The attributes a nested resource of `type_name` takes from its child."""
    values = output_values(outputs)
    if type_name == SCALING_TYPE:
        return scaling_attributes(members, ScalingState.read(values.get(SCALING_STATE_OUTPUT)))
    if type_name == CHAIN_TYPE:
        return chain_attributes(group_attributes(members, []))
    if type_name in DEPLOYMENT_GROUPS:
        return deployment_group_attributes({m.name: m.attributes for m in members})
    if type_name == GROUP_TYPE:
        removed = values.get("removed_rsrc_list")
        return group_attributes(members, [str(r) for r in removed] if isinstance(removed, list) else [])
    if type_name == STACK_TYPE:
        listed = [
            {"output_key": k, "output_value": v.value, "description": v.description or "No description given"}
            for k, v in outputs.items()
        ]
        return {**values, "outputs": values, "outputs_list": listed, "stack_name": child_name}
    # A template resource: its outputs; OS::stack_id is the child's id unless an output sets it.
    return {
        "OS::stack_id": child_id,
        **{k: v for k, v in values.items() if v is not None or k != "OS::stack_id"},
    }


def removed_names(attributes: Mapping[str, Any]) -> list[str]:
    """The names a group removed before (its `removed_rsrc_list` attribute)."""
    removed = attributes.get("removed_rsrc_list")
    return [str(r) for r in removed] if isinstance(removed, list) else []
