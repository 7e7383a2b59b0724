"""The HOT template language: parse, validate and resolve Heat templates.

Pure (no I/O). Flow: `loader` (bytes -> data, limits) -> `template` /
`environment` (sections) -> `stack.load_stack` (parameters and their custom
constraints, conditions, registry, compile, property checks, dependency graph) -> `resolve`
(properties and outputs at check time, property diffs). `validate_api`
renders Heat's validate response. Errors: `TemplateInvalid` (all problems
with their paths) and `ResolutionError` (`BudgetExceeded` when evaluation
would produce more than the request's `limits.Budget`), all `InvalidInput`.
Everything here runs in the caller's thread; the engine runs loads in its
template pool (`services.engine.template_pool`), and what crosses to it pickles.

Decisions where Heat leaves room:
- deletion_policy Snapshot is accepted only for types that take snapshots
  (deleting instead would lose data the user asked to keep);
- a type accepts any attribute name when its `attributes` contains "*" or
  every name (`shared.plugins.base.AnyAttributes`);
- values depending on other resources are not type-checked at load time
  (their presence still satisfies "required");
- yaql runs with the `yaql` library as Heat's does (`$.data`, Heat's
  `[yaql]` limits as settings, `yaql_function`), folded at load when its data
  is known; each yaql call and the result count against the evaluation
  budget, and a value needing yaql at check time is resolved in the template
  pool (`resolve.needs_worker`), where time is bounded;
- Fn::GetAZs and Fn::MemberListToMap are validation errors saying they are
  not supported; resource_facade outside a child stack gives what a
  resource without metadata or policies has;
- custom_constraint (`custom_constraints`): a name with a validator (Converge's
  own, a plugin's from the `converge.constraints` entry points) checks the value
  at create, update and validate; a name Heat registers for an OpenStack service
  Converge lacks (`nova.flavor`, ...) is accepted unchecked, said so by a
  validate warning and a stack event; an unknown name refuses the value at
  create and update, and the name at validate (Heat's validate ignores it);
  a stored goal read back is not checked again;
- `get_attr: [group, resource.<n>]` is member n's reference id, as in Heat
  (`expr.MemberAttributes`); with an attribute after it, that member's attribute;
- a top-level property resolving to null counts as not set, as in Heat.
"""

from services.engine.template.custom_constraints import (
    DEFAULT_CONSTRAINTS,
    CustomConstraints,
    constraint_registry,
)
from services.engine.template.definition import (
    DeletionPolicy,
    OutputDefinition,
    ResourceDefinition,
    StackDefinition,
    StackIdentity,
    UncheckedValue,
)
from services.engine.template.environment import Environment, parse_environment
from services.engine.template.errors import BudgetExceeded, ResolutionError, TemplateError, TemplateInvalid
from services.engine.template.expr import ResourceData
from services.engine.template.limits import DEFAULT_LIMITS, Budget, TemplateLimits
from services.engine.template.resolve import (
    OutputValue,
    PropertyDiff,
    diff_properties,
    resolve_metadata,
    resolve_outputs,
    resolve_properties,
)
from services.engine.template.stack import ANY_ATTRIBUTE, load_stack
from services.engine.template.template import Template, parse_template
from services.engine.template.validate_api import validate_response

__all__ = [
    "ANY_ATTRIBUTE",
    "DEFAULT_CONSTRAINTS",
    "DEFAULT_LIMITS",
    "Budget",
    "BudgetExceeded",
    "CustomConstraints",
    "DeletionPolicy",
    "Environment",
    "OutputDefinition",
    "OutputValue",
    "PropertyDiff",
    "ResolutionError",
    "ResourceData",
    "ResourceDefinition",
    "StackDefinition",
    "StackIdentity",
    "Template",
    "TemplateError",
    "TemplateInvalid",
    "TemplateLimits",
    "UncheckedValue",
    "constraint_registry",
    "diff_properties",
    "load_stack",
    "parse_environment",
    "parse_template",
    "resolve_metadata",
    "resolve_outputs",
    "resolve_properties",
    "validate_response",
]
