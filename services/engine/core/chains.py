"""OS::Heat::ResourceChain's child template. Pure.

Where it sits: `core.child_goals.child_goal` calls `chain_template` when a chain's
job becomes an operation of its child stack. The child has one member per
entry of `resources`, named by its index ("0", "1", ...), of that type, each
given `resource_properties`; unless `concurrent`, each member `depends_on` the
one before it, so the child creates them in order (and deletes them in
reverse). Changing an entry's type replaces that member only; adding entries
adds members at the end, removing entries deletes the last ones.

Its attributes are a group's (`core.child_attributes.group_attributes`: `refs`,
`refs_map`, `attributes`, `resource.<n>[.<name>]`, and any other name as the
list of that attribute of every member, in chain order), without the
group-only `removed_rsrc_list`. A chain's `get_resource` is its child stack's id,
as Heat's.

Limits: the number of members is checked against `max_resources`, and the
copies of `resource_properties` are charged to the evaluation budget before
any is built.
"""

from __future__ import annotations

from typing import Any

from services.engine.template import Budget, TemplateLimits
from services.engine.template.intrinsics import measure
from services.engine.template.limits import SETTINGS
from shared.plugins.builtin.nested import ChainProperties, ResourceChain

CHAIN_TYPE = ResourceChain.type_name


def check_chain(chain: ChainProperties, limits: TemplateLimits) -> str | None:
    """Why a chain this long cannot be built ("resources: ..."), or None."""
    if len(chain.resources) > limits.max_resources:
        return (
            f"resources: {len(chain.resources)} members are more than a stack may hold "
            f"(max_resources {limits.max_resources}; raise it with {SETTINGS['max_resources']})"
        )
    return None


def chain_member(chain: ChainProperties, index: int) -> dict[str, Any]:
    """Member `index`'s resource snippet."""
    snippet: dict[str, Any] = {"type": chain.resources[index]}
    if chain.resource_properties is not None:
        snippet["properties"] = dict(chain.resource_properties)
    if index > 0 and not chain.concurrent:
        snippet["depends_on"] = [str(index - 1)]
    return snippet


def chain_template(chain: ChainProperties, budget: Budget, version: str) -> dict[str, Any]:
    """The chain's child template (HOT `version`); every member is paid for first."""
    nodes, chars = measure(chain.resource_properties or {})
    count = len(chain.resources)
    budget.charge(items=count * (nodes + 1), chars=count * chars + sum(len(t) for t in chain.resources))
    resources = {str(i): chain_member(chain, i) for i in range(count)}
    return {"heat_template_version": version, "resources": resources}


def chain_attributes(group: dict[str, Any]) -> dict[str, Any]:
    """A chain's attributes from the group attributes of its members (`outputs`, member
    name -> its attributes, stays: `resource.<n>.<name>` is read from it)."""
    return {k: v for k, v in group.items() if k != "removed_rsrc_list"}
