"""A ResourceGroup's child template: member names, sizes and batches. Pure.

Where it sits: `core.child_goals.child_goal` builds a group's child template
here (`group_plan`, `check_group`, `batches`, `group_template`), as it does
an AutoScalingGroup's from the same pieces; loading a stack refuses a group
too big or with a bad `update_policy` before anything changes
(`check_group_sizes`, `group_policy_errors`); `core.nested_checks` validates
a member's snippet (`member_snippet`).

Members are named "0", "1", ... skipping removed names; scaling from N to M
keeps the first min(N, M) names, so only the difference is created or
deleted. A name removed by `removal_policies` is never used again (Heat's
"blacklist"), remembered in the group's `removed_rsrc_list` attribute. A
group's size is checked before its child template is built (`check_group`:
`count` against `max_resources`, the template's estimated size against
`max_template_bytes`), and building it is charged to the evaluation budget,
so a tiny `count: 100000000` costs nothing but its refusal.

A group's `update_policy` (`batch_create` when its child is created,
`rolling_update` when it is updated) becomes the order of its child template:
the members, in index order, are cut into batches of `max_batch_size`
(for a rolling update, also leaving at least `min_in_service` members of the
new size out of each batch, but never fewer than one in it) and each member
of a batch `depends_on` every member of the batch before, so the child's
convergence works on one batch at a time (`batches`). `pause_time` is the
wait before each batch after the first (`BATCH_PAUSE_SECTION`).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from services.engine.core.nesting import GROUP_TEMPLATE_VERSION, GROUP_TYPE, NestedInvalid, without_digest
from services.engine.template import (
    Budget,
    StackDefinition,
    TemplateError,
    TemplateInvalid,
    TemplateLimits,
)
from services.engine.template.expr import DictExpr
from services.engine.template.intrinsics import measure
from services.engine.template.limits import SETTINGS
from shared.plugins.builtin.nested import GroupProperties, GroupUpdatePolicy, ResourceDefinition

_NO_DEFINITION = ResourceDefinition(type="OS::Heat::None")  # a group whose definition is not known yet


@dataclass(frozen=True)
class GroupPlan:
    members: tuple[str, ...]  # names, in index order
    removed: tuple[str, ...]  # names never to use again


def group_plan(group: GroupProperties, *, members: Mapping[str, str], removed: Sequence[str]) -> GroupPlan:
    """The member names of `group`: the first `count` of "0", "1", ... not removed.

    `members` maps the reference id of each current member to its name, so
    removal_policies may name members either way; `removed` are the names
    removed by earlier updates (kept unless the mode is "update").
    """
    listed = [
        members.get(entry, entry) for policy in group.removal_policies for entry in policy.resource_list
    ]
    kept = [] if group.removal_policies_mode == "update" else list(removed)
    gone = tuple(dict.fromkeys([*kept, *listed]))
    excluded = set(gone)
    names = itertools.islice((str(i) for i in itertools.count() if str(i) not in excluded), group.count)
    return GroupPlan(tuple(names), gone)


def check_group(group: GroupProperties, limits: TemplateLimits) -> str | None:
    """Why a group this size cannot be built ("count: ..."), or None; cheap (nothing
    is built): the member count against `max_resources`, and the child template's
    size, estimated from one member, against `max_template_bytes`."""
    if group.count > limits.max_resources:
        return (
            f"count: {group.count} members are more than a stack may hold "
            f"(max_resources {limits.max_resources}; raise it with {SETTINGS['max_resources']})"
        )
    member = _member(group.resource_def, group.index_var, str(max(group.count - 1, 0)))
    estimate = group.count * (len(json.dumps(member, separators=(",", ":"))) + len(str(group.count)) + 4)
    if estimate > limits.max_template_bytes:
        return (
            f"count: {group.count} members make a nested template of about {estimate} bytes, more than "
            f"the maximum template size ({limits.max_template_bytes} bytes; raise it with "
            f"{SETTINGS['max_template_bytes']})"
        )
    return None


def check_group_sizes(definition: StackDefinition) -> None:
    """Refuse (TemplateInvalid naming `resources.<name>.properties.count`) a group
    whose size, known when the stack loads, `check_group` refuses, or whose
    `update_policy` is not a ResourceGroup's (naming `resources.<name>.update_policy...`),
    so a create or update asking for one fails before anything changes."""
    errors: list[TemplateError] = []
    for name, resource in definition.resources.items():
        if resource.type != GROUP_TYPE:
            continue
        errors.extend(_policy_errors(name, resource.update_policy))
        properties = resource.properties
        items = properties.items if isinstance(properties, DictExpr) else properties
        if not isinstance(items, dict):
            continue
        path = f"resources.{name}.properties"
        count = items.get("count")
        if isinstance(properties, dict):  # all known: check the whole group
            try:
                group = GroupProperties.model_validate(without_digest(properties))
            except ValidationError:
                continue  # reported by the property checks
        elif isinstance(count, int) and not isinstance(count, bool):
            group = GroupProperties.model_construct(count=count, resource_def=_NO_DEFINITION)
        else:
            continue
        problem = check_group(group, definition.limits)
        if problem is not None:
            field, _, message = problem.partition(": ")
            errors.append(TemplateError(f"{path}.{field}", f"{GROUP_TYPE} {message}"))
    if errors:
        raise TemplateInvalid(errors)


def group_policy_errors(definition: StackDefinition) -> list[TemplateError]:
    """The errors of every group's `update_policy` (as `check_group_sizes` reports them)."""
    return [
        error
        for name, resource in definition.resources.items()
        if resource.type == GROUP_TYPE
        for error in _policy_errors(name, resource.update_policy)
    ]


def _policy_errors(name: str, update_policy: Mapping[str, Any]) -> list[TemplateError]:
    """A group's `update_policy` checked against Heat's schema (`batch_create`,
    `rolling_update`), each error naming its path."""
    try:
        GroupUpdatePolicy.model_validate(dict(update_policy))
    except ValidationError as exc:
        out = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"])
            out.append(TemplateError(f"resources.{name}.update_policy.{where}", f"{GROUP_TYPE} {err['msg']}"))
        return out
    return []


def member_snippet(definition: Mapping[str, Any], index_var: str, name: str) -> dict[str, Any] | None:
    """Member `name`'s resource snippet from a group's `resource_def` as given (None:
    not a valid definition)."""
    try:
        parsed = ResourceDefinition.model_validate(dict(definition))
    except ValidationError:
        return None
    return _member(parsed, index_var, name)


def _member(definition: ResourceDefinition, variable: str, name: str) -> dict[str, Any]:
    snippet: dict[str, Any] = {"type": definition.type}
    if definition.properties is not None:
        snippet["properties"] = _substitute(definition.properties, variable, name)
    if definition.metadata is not None:
        snippet["metadata"] = _substitute(definition.metadata, variable, name)
    return snippet


def group_template(
    group: GroupProperties,
    plan: GroupPlan,
    budget: Budget,
    order: Sequence[Sequence[str]] = (),
) -> dict[str, Any]:
    """The group's child template: one resource per member, `index_var` replaced by
    the member's name; the removed names are an output (`removed_rsrc_list`).
    With `order` (batches, see `batches`), each member depends on every member of
    the batch before its own. Every member is paid for (`budget`) before any is built."""
    definition = group.resource_def
    nodes, chars = measure(definition.model_dump(exclude_none=True))
    budget.charge(items=len(plan.members) * nodes, chars=len(plan.members) * chars)
    before: dict[str, list[str]] = {}
    for previous, batch in itertools.pairwise(order):
        for name in batch:
            before[name] = list(previous)
    resources: dict[str, Any] = {}
    for name in plan.members:
        resources[name] = _member(definition, group.index_var, name)
        if before.get(name):
            resources[name]["depends_on"] = before[name]
    return {
        "heat_template_version": GROUP_TEMPLATE_VERSION,
        "resources": resources,
        "outputs": {"removed_rsrc_list": {"value": list(plan.removed)}},
    }


def _substitute(value: Any, variable: str, index: str) -> Any:
    if isinstance(value, str):
        return value.replace(variable, index)
    if isinstance(value, list):
        return [_substitute(v, variable, index) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, variable, index) for k, v in value.items()}
    return value


def batches(
    update_policy: Mapping[str, Any], members: Sequence[str], *, creating: bool
) -> tuple[tuple[tuple[str, ...], ...], float]:
    """The batches `members` are created (`creating`) or updated in under a group's
    `update_policy`, and the pause between batches (seconds). No policy for the
    operation: one batch, no pause. Raises `NestedInvalid` for a policy that is not
    a ResourceGroup's."""
    try:
        policy = GroupUpdatePolicy.model_validate(dict(update_policy))
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "update_policy"
        raise NestedInvalid(f"{GROUP_TYPE} update_policy.{where}: {err['msg']}") from None
    if not members:
        return (), 0.0
    if creating and policy.batch_create is not None:
        size, pause = policy.batch_create.max_batch_size, policy.batch_create.pause_time
    elif not creating and policy.rolling_update is not None:
        rolling = policy.rolling_update
        size = max(1, min(rolling.max_batch_size, len(members) - rolling.min_in_service))
        pause = rolling.pause_time
    else:
        return (tuple(members),), 0.0
    cut = tuple(tuple(members[i : i + size]) for i in range(0, len(members), size))
    return cut, float(pause)
