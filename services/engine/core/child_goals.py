"""A nested resource's child goal, by type. Pure.

Where it sits: when a nested resource's job becomes an operation of its child
stack (`services.engine.nested`), `child_goal` computes the child's goal from
the resource's properties and the parent's environment and files, validated
against the type's properties (`NestedInvalid` names the property):

- `OS::Heat::Stack`: its `template`, `parameters` and `timeout`;
- a template resource: the template file the type names, its properties as
  parameters;
- `OS::Heat::ResourceGroup`: one member per name of its plan, ordered by its
  `update_policy` (`core.groups`);
- `OS::Heat::ResourceChain`: one member per listed type (`core.chains`);
- a deployment group (`OS::Heat::SoftwareDeploymentGroup`,
  `StructuredDeploymentGroup`): one deployment per entry of its `servers` map,
  named by the entry's name (`deployment_group_template`);
- `OS::Heat::AutoScalingGroup`: built the same way from its `resource`, sized
  by `core.scaling` (`scaling_template`): its members oldest first, the next
  unused index and the desired_capacity its size came from
  (`core.nesting.ScalingState`) are an output of its child template, so they
  come back with the group's attributes and the next goal starts from them;
  its `rolling_updates` orders the members of an update as a ResourceGroup's
  `rolling_update` does.

What the resource takes back from its child is `core.child_attributes`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import ValidationError

from services.engine.core.chains import chain_template, check_chain
from services.engine.core.groups import GroupPlan, batches, check_group, group_plan, group_template
from services.engine.core.nesting import (
    CHAIN_TYPE,
    DEPLOYMENT_GROUPS,
    GROUP_TEMPLATE_VERSION,
    GROUP_TYPE,
    SCALING_STATE_OUTPUT,
    SCALING_TYPE,
    STACK_TYPE,
    NestedInvalid,
    ScalingState,
    child_environment,
    without_digest,
)
from services.engine.core.scaling import plan_members, size_after_update
from services.engine.template import DEFAULT_LIMITS, Budget, TemplateLimits
from services.engine.template.environment import BATCH_PAUSE_SECTION, FACADE_SECTION, is_template_reference
from services.engine.template.intrinsics import measure
from services.engine.template.limits import SETTINGS
from shared.plugins.builtin.nested import (
    AutoScalingGroupProperties,
    ChainProperties,
    GroupProperties,
    StackProperties,
)
from shared.plugins.builtin.software_deployment import (
    MEMBER_TYPES,
    SoftwareDeploymentGroupProperties,
    StructuredDeploymentGroupProperties,
    group_members,
)

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


@dataclass(frozen=True)
class ChildGoal:
    """What the child stack should be: as an update of a stack would take it."""

    template: Mapping[str, Any] | str
    environment: Mapping[str, Any] = field(default_factory=dict)
    parameters: Mapping[str, Any] = field(default_factory=dict)
    files: Mapping[str, str] = field(default_factory=dict)
    timeout_mins: int | None = None


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
