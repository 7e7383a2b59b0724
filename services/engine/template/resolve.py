"""Lazy resolution: a resource's properties and the stack's outputs, at check time.

Last step of the flow. When the convergence engine checks a resource it
passes the `ResourceData` (reference id, attributes) its dependencies
reported; `resolve_properties` evaluates the compiled tree with them and
returns plain JSON values. `diff_properties` compares two resolved
property sets against the plugin's schema (defaults applied) and says
whether the change can be applied in place. `resolve_outputs` never raises
for a missing or failed resource: the output carries an error instead, like
Heat's `output_error`. Each call evaluates within one evaluation `Budget`
(by default one of the limits the stack was loaded with), so what a check
computes on the engine's event loop is bounded like a load: a function
needing more fails the resource with `BudgetExceeded`. A value holding a
function whose time the budget does not bound (`yaql`: one regular
expression can run for ever) is resolved in the template pool instead:
`needs_worker` says so, and `resolve_goal` / `resolve_output_values` are
the jobs (they take only what they need, to pickle little).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from services.engine.template.definition import OutputDefinition, ResourceDefinition, StackDefinition
from services.engine.template.errors import BudgetExceeded, ResolutionError
from services.engine.template.expr import DataMap, calls_any, copy_json, evaluate
from services.engine.template.limits import Budget, TemplateLimits
from services.engine.template.properties import schema_defaults
from shared.plugins.base import Properties, UpdateRule, update_rule

#: Functions whose evaluation the budget does not bound in time: run in a template worker.
WORKER_FUNCTIONS = frozenset({"yaql"})


def needs_worker(stack: StackDefinition, name: str | None = None) -> bool:
    """Whether resolving resource `name` (its properties and metadata), or the
    outputs when `name` is None, evaluates a function of `WORKER_FUNCTIONS`."""
    if name is None:
        return any(calls_any(o.value, WORKER_FUNCTIONS) for o in stack.outputs.values())
    resource = stack.resources[name]
    return calls_any(resource.properties, WORKER_FUNCTIONS) or calls_any(resource.metadata, WORKER_FUNCTIONS)


def resolve_goal(
    resource: ResourceDefinition, data: DataMap, limits: TemplateLimits
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The resolved properties and metadata of one resource (a template-pool job)."""
    return _properties(resource, data, Budget(limits)), _metadata(resource, data, Budget(limits))


def resolve_properties(
    stack: StackDefinition, name: str, data: DataMap, *, budget: Budget | None = None
) -> dict[str, Any]:
    """Resolved properties of `name`; `data` holds each referenced resource's data.

    Properties resolving to null are left out (null means "not set", as in
    Heat). Raises `ResolutionError` (an `InvalidInput`) naming the place when
    a function cannot be applied to the values it got, or the values are
    bigger than the budget.
    """
    budget = budget if budget is not None else Budget(stack.limits)
    return _properties(stack.resources[name], data, budget)


def _properties(definition: ResourceDefinition, data: DataMap, budget: Budget) -> dict[str, Any]:
    path = f"resources.{definition.name}.properties"
    value = evaluate(definition.properties, data, budget)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ResolutionError("properties must resolve to a map", path=path)
    try:
        return {k: copy_json(v, budget) for k, v in value.items() if v is not None}
    except BudgetExceeded as exc:
        raise exc.located(path, "the resolved properties") from None


def resolve_metadata(
    stack: StackDefinition, name: str, data: DataMap, *, budget: Budget | None = None
) -> dict[str, Any]:
    """Resolved metadata of `name` (an empty map when there is none)."""
    budget = budget if budget is not None else Budget(stack.limits)
    return _metadata(stack.resources[name], data, budget)


def _metadata(definition: ResourceDefinition, data: DataMap, budget: Budget) -> dict[str, Any]:
    path = f"resources.{definition.name}.metadata"
    value = evaluate(definition.metadata, data, budget)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ResolutionError("metadata must resolve to a map", path=path)
    try:
        return copy_json(value, budget)  # type: ignore[no-any-return]
    except BudgetExceeded as exc:
        raise exc.located(path, "the resolved metadata") from None


@dataclass(frozen=True)
class OutputValue:
    """An output as shown to users: a value, or an error explaining its absence."""

    value: Any
    description: str = ""
    error: str | None = None


def resolve_outputs(
    stack: StackDefinition, data: DataMap, *, budget: Budget | None = None
) -> dict[str, OutputValue]:
    """Every output, resolved from `data` (resources that have completed so far),
    all within one budget."""
    budget = budget if budget is not None else Budget(stack.limits)
    return _outputs(stack.outputs, data, budget)


def resolve_output_values(
    outputs: Mapping[str, OutputDefinition], data: DataMap, limits: TemplateLimits
) -> dict[str, OutputValue]:
    """`resolve_outputs` of these outputs (a template-pool job)."""
    return _outputs(outputs, data, Budget(limits))


def _outputs(
    outputs: Mapping[str, OutputDefinition], data: DataMap, budget: Budget
) -> dict[str, OutputValue]:
    out: dict[str, OutputValue] = {}
    for name, output in outputs.items():
        if not output.enabled:
            out[name] = OutputValue(None, output.description)
            continue
        problem = _unavailable(output.requires, data)
        if problem is not None:
            out[name] = OutputValue(None, output.description, problem)
            continue
        try:
            value = copy_json(evaluate(output.value, data, budget), budget)
        except BudgetExceeded as exc:
            located = exc.located(f"outputs.{name}.value", "the output")
            out[name] = OutputValue(None, output.description, str(located))
            continue
        except ResolutionError as exc:
            out[name] = OutputValue(None, output.description, str(exc))
            continue
        out[name] = OutputValue(value, output.description)
    return out


def _unavailable(requires: frozenset[str], data: DataMap) -> str | None:
    for resource in sorted(requires):
        found = data.get(resource)
        if found is None:
            return f"Resource {resource} is not available"
        if found.error is not None:
            return f"Resource {resource} failed: {found.error}"
    return None


@dataclass(frozen=True)
class PropertyDiff:
    """Which properties changed, and whether any of them forces replacement."""

    changed: frozenset[str]
    replace: bool

    @property
    def unchanged(self) -> bool:
        return not self.changed


def diff_properties(
    schema: type[Properties] | None, old: Mapping[str, Any], new: Mapping[str, Any]
) -> PropertyDiff:
    """Compare resolved properties; an omitted property equals its default.

    Each changed property applies as its schema's `update_rule` says: one the
    schema does not declare forces replacement unless the schema accepts
    undeclared properties (`OS::Heat::None`'s, updated in place). Without a schema
    (a template resource, whose properties are its template's parameters) every
    change applies in place.
    """
    if schema is None:
        keys = set(old) | set(new)
        return PropertyDiff(frozenset(k for k in keys if not _same(old.get(k), new.get(k))), False)
    defaults = schema_defaults(schema)
    changed: set[str] = set()
    replace = False
    for key in set(old) | set(new) | set(defaults):
        before = old.get(key)
        after = new.get(key)
        if before is None:
            before = defaults.get(key)
        if after is None:
            after = defaults.get(key)
        if _same(before, after):
            continue
        changed.add(key)
        if update_rule(schema, key) is UpdateRule.REPLACE:
            replace = True
    return PropertyDiff(frozenset(changed), replace)


def _same(a: Any, b: Any) -> bool:
    # 1 == 1.0 == True in Python; properties compare by JSON value and type.
    if type(a) is not type(b) and not (
        isinstance(a, int | float)
        and isinstance(b, int | float)
        and not isinstance(a, bool)
        and not isinstance(b, bool)
    ):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)
