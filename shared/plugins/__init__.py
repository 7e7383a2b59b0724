"""Resource plugin interface: what a resource type declares and implements.

A resource type is a class deriving from `ResourceType`. It declares
- `properties`: a pydantic model (`Properties` subclass); each field says, via
  `prop(update=...)`, whether a change applies in place or forces replacement;
- `attributes`: attribute name -> description;
and implements the async actions `create`, `update`, `delete`, `observe` and
optionally `signal`; an action that finds its resource gone raises
`ResourceGone`. Types are discovered through the `converge.resources`
entry-point group (see `registry`); built-ins register the same way.

The engine uses only the declarations (validation, diffing, schemas); the
worker and observer run the actions.

Custom constraints (`custom_constraint: <name>` on a template parameter) are
plugins too: validator functions found through the `converge.constraints`
group (`constraints`), which only the engine loads.
"""

from shared.plugins.base import (
    ActionContext,
    ActionResult,
    AnyAttributes,
    Observation,
    ObservedState,
    Outcome,
    Properties,
    ReplacementNeeded,
    ResourceGone,
    ResourceType,
    UpdateRule,
    prop,
    update_rule,
)

__all__ = [
    "ActionContext",
    "ActionResult",
    "AnyAttributes",
    "Observation",
    "ObservedState",
    "Outcome",
    "Properties",
    "ReplacementNeeded",
    "ResourceGone",
    "ResourceType",
    "UpdateRule",
    "prop",
    "update_rule",
]
