"""Nested stacks: what a nested resource's child stack is, and what it passes back. Pure.

Where it sits: a resource whose type nests a stack — `OS::Heat::Stack`,
`OS::Heat::ResourceGroup`, or a template resource (a type the environment
maps to a template file) — is run by the engine, not by a worker
(`services.engine.nested`): its job becomes an operation of a child stack.
`child_goal` computes that child's goal from the resource's properties and
the parent's environment and files; when the child's operation ends,
`child_attributes` computes what the resource takes from it (the child's
outputs; a group's from its members).

A nested resource's recorded properties carry `GOAL_KEY`, a digest of what
else its child's goal depends on (the parent's resource registry, parameter
defaults and files), so a change there updates the child even when the
properties are equal, and an unchanged child is left alone.

Groups: members are named "0", "1", ... skipping removed names; scaling from
N to M keeps the first min(N, M) names, so only the difference is created or
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

A deployment group (`OS::Heat::SoftwareDeploymentGroup`, `StructuredDeploymentGroup`)
is a child of one deployment per entry of its `servers` map, named by the entry's
name (`deployment_group_template`); its attributes are maps of name -> the member's
(`deploy_stdouts`, `deploy_stderrs`, `deploy_status_codes`, and every output).

An AutoScalingGroup's child is built the same way from its `resource`, sized
by `core.scaling` (`scaling_template`): its members oldest first, the next
unused index and the desired_capacity its size came from (`ScalingState`)
are an output of its child template, so they come back with the group's
attributes and the next goal starts from them; its `rolling_updates` orders
the members of an update as a ResourceGroup's `rolling_update` does.

An OS::Heat::ResourceChain's child is one member per listed type
(`core.chains`); its attributes are a group's.
"""

from __future__ import annotations

import fnmatch
import hashlib
import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import ValidationError

from services.engine.core.chains import CHAIN_TYPE as CHAIN_TYPE
from services.engine.core.chains import chain_attributes, chain_template, check_chain
from services.engine.core.scaling import plan_members, size_after_update
from services.engine.template import (
    DEFAULT_LIMITS,
    Budget,
    OutputValue,
    StackDefinition,
    TemplateError,
    TemplateInvalid,
    TemplateLimits,
)
from services.engine.template.environment import BATCH_PAUSE_SECTION, FACADE_SECTION, is_template_reference
from services.engine.template.expr import DictExpr, MemberAttributes
from services.engine.template.intrinsics import measure
from services.engine.template.limits import SETTINGS
from shared.errors import InvalidInput
from shared.plugins.builtin.nested import (
    AutoScalingGroup,
    AutoScalingGroupProperties,
    ChainProperties,
    GroupProperties,
    GroupUpdatePolicy,
    ResourceDefinition,
    ResourceGroup,
    StackProperties,
)
from shared.plugins.builtin.nested import NestedStack as _NestedStack
from shared.plugins.builtin.software_deployment import (
    DEPLOYMENT_GROUP_TYPES,
    MEMBER_TYPES,
    SoftwareDeploymentGroupProperties,
    StructuredDeploymentGroupProperties,
    group_members,
)
from shared.plugins.builtin.software_deployment import group_attributes as deployment_group_attributes

STACK_TYPE = _NestedStack.type_name
GROUP_TYPE = ResourceGroup.type_name
SCALING_TYPE = AutoScalingGroup.type_name
DEPLOYMENT_GROUPS = frozenset(DEPLOYMENT_GROUP_TYPES)
NESTED_TYPES = frozenset({STACK_TYPE, GROUP_TYPE, SCALING_TYPE, CHAIN_TYPE, *DEPLOYMENT_GROUPS})
#: Types whose attributes come from their child's members (see `child_attributes`).
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
_NO_DEFINITION = ResourceDefinition(type="OS::Heat::None")  # a group whose definition is not known yet
_NO_INDEX_VAR = "\x00no index\x00"  # an AutoScalingGroup's members are copies: nothing is replaced
M = TypeVar(
    "M",
    StackProperties,
    GroupProperties,
    AutoScalingGroupProperties,
    ChainProperties,
    SoftwareDeploymentGroupProperties,
    StructuredDeploymentGroupProperties,
)


def is_nested(type_name: str) -> bool:
    """Whether resources of `type_name` are child stacks (run by the engine)."""
    return type_name in NESTED_TYPES or is_template_reference(type_name)


class NestedInvalid(InvalidInput):
    """A nested resource's properties cannot make a child stack."""


@dataclass(frozen=True)
class ChildGoal:
    """What the child stack should be: as an update of a stack would take it."""

    template: Mapping[str, Any] | str
    environment: Mapping[str, Any] = field(default_factory=dict)
    parameters: Mapping[str, Any] = field(default_factory=dict)
    files: Mapping[str, str] = field(default_factory=dict)
    timeout_mins: int | None = None


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


def child_name(parent_name: str, resource_name: str, child_id: str) -> str:
    """`{parent}-{resource}-{short id}`, as Heat names nested stacks."""
    name = f"{parent_name}-{resource_name}-{child_id.replace('-', '')[:12]}"
    return name if len(name) <= _NAME_LIMIT else name[-_NAME_LIMIT:].lstrip("-_.") or name[-12:]


def child_goal(
    type_name: str,
    properties: Mapping[str, Any],
    *,
    environment: Mapping[str, Any],
    files: Mapping[str, str],
    timeout_mins: int | None,
    members: Mapping[str, str] | None = None,
    removed: Sequence[str] = (),
    limits: TemplateLimits = DEFAULT_LIMITS,
    budget: Budget | None = None,
    resource_name: str | None = None,
    facade: Mapping[str, Any] | None = None,
    creating: bool = False,
    scaling: ScalingState | None = None,
    failed: Sequence[str] = (),
) -> ChildGoal:
    """The goal of the child stack of a resource of `type_name` with `properties`.

    `environment` and `files` are the parent's; `timeout_mins` the parent's
    timeout, inherited unless the resource sets its own. `resource_name` is the
    resource's name (the child gets the registry section written under it) and
    `facade` what `resource_facade` returns in the child. For a group,
    `members` maps each current member's reference id to its name and
    `removed` are the names removed before (see `group_plan`), and `creating`
    says whether the child is being created (its `update_policy`, from `facade`,
    then orders the members by `batch_create`, else by `rolling_update`); its size is
    checked against `limits` before anything is built, and building it is
    charged to `budget` (by default one of `limits`). For an AutoScalingGroup,
    `scaling` is its state after its last operation (None: it has none yet)
    and `failed` the names of its failed members (removed first).
    Raises `NestedInvalid` when the properties cannot make a child.
    """
    env = child_environment(environment, resource_name)
    if facade:
        env[FACADE_SECTION] = dict(facade)
    props = without_digest(properties)
    if type_name == STACK_TYPE:
        stack = _validated(StackProperties, props, type_name)
        return ChildGoal(
            stack.template, env, dict(stack.parameters), dict(files), stack.timeout or timeout_mins
        )
    if type_name == GROUP_TYPE:
        group = _validated(GroupProperties, props, type_name)
        problem = check_group(group, limits)
        if problem is not None:
            raise NestedInvalid(f"{type_name} property {problem}")
        plan = group_plan(group, members=members or {}, removed=removed)
        policy = (facade or {}).get("update_policy") or {}
        order, pause = batches(policy, plan.members, creating=creating)
        template = group_template(group, plan, budget if budget is not None else Budget(limits), order)
        if pause > 0 and len(order) > 1:
            env[BATCH_PAUSE_SECTION] = {"seconds": pause, "members": [m for b in order[1:] for m in b]}
        return ChildGoal(template, env, {}, dict(files), timeout_mins)
    if type_name == SCALING_TYPE:
        scaled = _validated(AutoScalingGroupProperties, props, type_name)
        template = scaling_template(scaled, scaling, failed, limits, budget or Budget(limits), creating)
        return ChildGoal(template, env, {}, dict(files), timeout_mins)
    if type_name == CHAIN_TYPE:
        chain = _validated(ChainProperties, props, type_name)
        problem = check_chain(chain, limits)
        if problem is not None:
            raise NestedInvalid(f"{type_name} property {problem}")
        template = chain_template(chain, budget or Budget(limits), GROUP_TEMPLATE_VERSION)
        return ChildGoal(template, env, {}, dict(files), timeout_mins)
    if type_name in DEPLOYMENT_GROUPS:
        schema = (
            StructuredDeploymentGroupProperties
            if type_name == "OS::Heat::StructuredDeploymentGroup"
            else SoftwareDeploymentGroupProperties
        )
        deployments = _validated(schema, props, type_name)
        template = deployment_group_template(type_name, deployments, limits, budget or Budget(limits))
        return ChildGoal(template, env, {}, dict(files), timeout_mins)
    if is_template_reference(type_name):
        content = files.get(type_name)
        if content is None:
            raise NestedInvalid(f"template file {type_name!r} is not in the stack's files")
        return ChildGoal(content, env, props, dict(files), timeout_mins)
    raise NestedInvalid(f"{type_name} is not a nested stack type")


def _validated(schema: type[M], props: Mapping[str, Any], type_name: str) -> M:
    try:
        return schema.model_validate(dict(props))
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "properties"
        raise NestedInvalid(f"{type_name} property {where}: {err['msg']}") from None


# -- groups -----------------------------------------------------------------


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


# -- deployment groups ------------------------------------------------------------


def deployment_group_template(
    type_name: str, group: SoftwareDeploymentGroupProperties, limits: TemplateLimits, budget: Budget
) -> dict[str, Any]:
    """A deployment group's child template: one deployment (of the member type) per
    server, named by the server's name in `servers`. Its size is checked first and
    every member is paid for (`budget`) before any is built."""
    if len(group.servers) > limits.max_resources:
        raise NestedInvalid(
            f"{type_name} property servers: {len(group.servers)} servers are more than a stack may hold "
            f"(max_resources {limits.max_resources}; raise it with {SETTINGS['max_resources']})"
        )
    members = group_members(group)
    for properties in members.values():
        nodes, chars = measure(properties)
        budget.charge(items=nodes, chars=chars)
    return {
        "heat_template_version": GROUP_TEMPLATE_VERSION,
        "resources": {
            name: {"type": MEMBER_TYPES[type_name], "properties": properties}
            for name, properties in members.items()
        },
    }


# -- autoscaling groups ---------------------------------------------------------


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


def scaling_template(
    group: AutoScalingGroupProperties,
    state: ScalingState | None,
    failed: Sequence[str],
    limits: TemplateLimits,
    budget: Budget,
    creating: bool,
) -> dict[str, Any]:
    """An AutoScalingGroup's child template: the members its size gives (the size it
    had, unless desired_capacity changed; see `scaling.size_after_update`), survivors
    keeping their names, new members named after every name used before, failed and
    then the oldest members removed first. When the child is updated, its existing
    members are updated in `rolling_updates` batches and new ones are created at once.
    Its state is an output."""
    size = size_after_update(
        state.size if state is not None else None,
        old_desired=state.desired if state is not None else None,
        new_desired=group.desired_capacity,
        min_size=group.min_size,
        max_size=group.max_size,
    )
    sized = GroupProperties.model_construct(count=size, resource_def=group.resource, index_var=_NO_INDEX_VAR)
    problem = check_group(sized, limits)
    if problem is not None:
        raise NestedInvalid(f"{SCALING_TYPE} size {size}: {problem.partition(': ')[2]}")
    plan = plan_members(
        state.members if state is not None else (),
        size,
        failed=failed,
        next_index=state.next_index if state is not None else 0,
    )
    desired = (
        group.desired_capacity if group.desired_capacity is not None else (state.desired if state else None)
    )
    kept = ScalingState(plan.members, plan.next_index, desired, size, state.cooldown if state else None)
    rolling = {"rolling_update": group.rolling_updates.model_dump()}
    # Only members that exist are updated in batches; new ones are created at once (as Heat's
    # resize), not one batch after another behind members that may still be settling.
    existing = [m for m in plan.members if m not in set(plan.added)]
    order, _ = batches(rolling, existing, creating=creating)
    template = group_template(sized, GroupPlan(plan.members, ()), budget, order)
    template["outputs"] = {SCALING_STATE_OUTPUT: {"value": kept.as_dict()}}
    return template


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


# -- what a child passes back ---------------------------------------------------


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
