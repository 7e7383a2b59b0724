"""Validating the child stacks of nested resources up front (`POST /validate`). Pure.

Where it sits: `goals.validate_goal` hands the stack it validated to
`nested_errors`, which builds the child of each nested resource as far as the
template says it statically — a template resource's file (its properties as
parameters), an `OS::Heat::Stack`'s inline `template` and `parameters`, a
ResourceGroup's `resource_def` (an AutoScalingGroup's `resource`) as its first
member (as Heat validates a group), a ResourceChain's members with their
`resource_properties`
— with the environment the child would get (`core.nesting.child_environment`),
then the children's children, down to `max_nested_depth`. Parameter values
that depend on other resources are not known yet and are not required.

Each error names the path into the child: a template resource's as Heat does,
`resources.web<web.yaml>.resources.x...`; an inline template's under the
property, `resources.st.properties.template.resources.x...`; a group member's
under its definition, `resources.group.properties.resource_def.properties.x`
(`resources.asg.properties.resource.properties.x`); a chain member's under its
entry, `resources.chain.properties.resources[1]...`.
The whole walk is charged to the request's evaluation budget: each child
costs its template's size and resource count besides what building it
costs, and a child met again with the same template, known parameters and
environment (a fan-out of one file) is checked once; at most `MAX_ERRORS` are
reported from one stack's children.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from services.engine.core.groups import member_snippet
from services.engine.core.nesting import (
    CHAIN_TYPE,
    GROUP_TEMPLATE_VERSION,
    GROUP_TYPE,
    SCALING_TYPE,
    STACK_TYPE,
    child_environment,
)
from services.engine.template import Budget, StackDefinition, StackIdentity, TemplateError, TemplateLimits
from services.engine.template.custom_constraints import DEFAULT_CONSTRAINTS, CustomConstraints
from services.engine.template.environment import is_template_reference
from services.engine.template.errors import ErrorList
from services.engine.template.expr import Expr
from services.engine.template.properties import property_items
from services.engine.template.stack import TypeTable, build_stack
from services.engine.template.template import Template, read_template

#: The most errors reported from one stack's children (a fan-out of one bad file would
#: otherwise report it once per path to it).
MAX_ERRORS = 20


def nested_errors(
    definition: StackDefinition,
    *,
    environment: Mapping[str, Any],
    files: Mapping[str, str],
    types: TypeTable,
    limits: TemplateLimits,
    budget: Budget,
    depth: int = 1,
    constraints: CustomConstraints = DEFAULT_CONSTRAINTS,
) -> list[TemplateError]:
    """Errors of the children of `definition`'s nested resources (and theirs), each
    with its path from the parent. `environment` is `definition`'s, as given."""
    return _Walk(files, types, limits, budget, constraints).errors(definition, environment, depth)


class _Walk:
    """One validation's walk: what it shares across the tree (and the children seen)."""

    def __init__(
        self,
        files: Mapping[str, str],
        types: TypeTable,
        limits: TemplateLimits,
        budget: Budget,
        constraints: CustomConstraints,
    ) -> None:
        self.files, self.types, self.limits, self.budget = files, types, limits, budget
        self.constraints = constraints
        self._seen: dict[str, list[TemplateError]] = {}

    def errors(
        self, definition: StackDefinition, environment: Mapping[str, Any], depth: int
    ) -> list[TemplateError]:
        if depth > self.limits.max_nested_depth:
            return []
        out: list[TemplateError] = []
        for name, resource in definition.resources.items():
            child = _child(name, resource.type, resource.properties, self.files, self.limits)
            if child is None:
                continue
            template, parameters, rewrite = child
            env = child_environment(environment, name)
            key = json.dumps(
                [_identity(template, resource.type), parameters, env, depth], sort_keys=True, default=str
            )
            found = self._seen.get(key)
            if found is None:
                found = self._seen[key] = self._check(definition, name, template, parameters, env, depth)
            out.extend(TemplateError(rewrite(e.path), e.message) for e in found[: MAX_ERRORS - len(out)])
            if len(out) >= MAX_ERRORS:
                break
        return out

    def _check(
        self,
        definition: StackDefinition,
        name: str,
        template: Template | Mapping[str, Any] | str,
        parameters: dict[str, Any],
        env: dict[str, Any],
        depth: int,
    ) -> list[TemplateError]:
        if isinstance(template, Template):  # a file: its text was paid for when it was read
            self.budget.charge(items=1 + len(template.resources))
        else:
            size = len(template) if isinstance(template, str) else len(json.dumps(template, default=str))
            self.budget.charge(items=1, chars=size)
        files, types, limits, budget = self.files, self.types, self.limits, self.budget
        errors = ErrorList()
        identity = StackIdentity(
            f"{definition.identity.stack_name}-{name}", "None", definition.identity.project_id
        )
        built = build_stack(
            template,
            environment=env,
            parameters=parameters,
            files=files,
            types=types,
            identity=identity,
            limits=limits,
            custom_constraints=self.constraints,
            require_values=False,
            errors=errors,
            budget=budget,
        )
        found = list(errors.errors)
        if built is not None and not found:
            found = self.errors(built, env, depth + 1)
        return found


def _identity(template: Template | Mapping[str, Any] | str, type_name: str) -> Any:
    """What names a child's template in the cache: its file, or its text or document."""
    return type_name if isinstance(template, Template) else template


_Child = tuple[Template | Mapping[str, Any] | str, dict[str, Any], Any]


def _child(
    name: str, type_name: str, properties: Any, files: Mapping[str, str], limits: TemplateLimits
) -> _Child | None:
    """(template, known parameters, path rewriter) of `name`'s child, or None when it is
    not nested or its template is not known statically (or unreadable: reported already)."""
    items = property_items({} if properties is None else properties) or {}
    base = f"resources.{name}"
    if is_template_reference(type_name):
        content = files.get(type_name)
        if content is None:
            return None
        parsed = read_template(content, limits=limits, errors=ErrorList())
        if parsed is None:
            return None
        prefix = f"{base}<{type_name}>"
        return parsed, _known(items), lambda path: f"{prefix}.{path}" if path else prefix
    if type_name == STACK_TYPE:
        template = items.get("template")
        if not isinstance(template, str | dict) or not _static(template):
            return None
        raw = items.get("parameters")
        parameters = _known(raw) if isinstance(raw, dict) else {}
        prefix = f"{base}.properties.template"
        return template, parameters, lambda path: f"{prefix}.{path}" if path else prefix
    if type_name == GROUP_TYPE:
        definition, count = items.get("resource_def"), items.get("count", 1)
        if not isinstance(definition, dict) or not _static(definition) or count == 0:
            return None
        index_var = items.get("index_var", "%index%")
        snippet = member_snippet(definition, index_var if isinstance(index_var, str) else "%index%", "0")
        if snippet is None:
            return None  # not a valid definition: its property check said why
        template = {"heat_template_version": GROUP_TEMPLATE_VERSION, "resources": {"0": snippet}}
        return template, {}, lambda path: _member_path(base, path)
    if type_name == SCALING_TYPE:
        definition = items.get("resource")
        if not isinstance(definition, dict) or not _static(definition):
            return None
        snippet = member_snippet(definition, "\x00", "0")
        if snippet is None:
            return None  # not a valid definition: its property check said why
        template = {"heat_template_version": GROUP_TEMPLATE_VERSION, "resources": {"0": snippet}}
        return template, {}, lambda path: _member_path(base, path, "resource")
    if type_name == CHAIN_TYPE:
        return _chain(base, items)
    return None


def _chain(base: str, items: Mapping[str, Any]) -> _Child | None:
    """A chain's members (the types known now, with `resource_properties`), each error
    named under its entry of `resources`."""
    types, props = items.get("resources"), items.get("resource_properties")
    if not isinstance(types, list) or not types or (props is not None and not _static(props)):
        return None
    if not isinstance(props, dict | None):
        return None  # not a map: its property check said why
    resources: dict[str, Any] = {}
    for index, type_name in enumerate(types):
        if isinstance(type_name, str) and type_name.strip():
            resources[str(index)] = {"type": type_name, **({"properties": props} if props else {})}
    if not resources:
        return None
    template = {"heat_template_version": GROUP_TEMPLATE_VERSION, "resources": resources}
    return template, {}, lambda path: _chain_path(base, path)


def _chain_path(base: str, path: str) -> str:
    head, dot, rest = path.partition(".")
    index, sep, tail = rest.partition(".")
    if head == "resources" and dot and index.isdigit():
        return f"{base}.properties.resources[{index}]{sep}{tail}"
    return f"{base}<nested_stack>.{path}" if path else base


def _member_path(base: str, path: str, definition: str = "resource_def") -> str:
    member = "resources.0"
    if path == member or path.startswith((member + ".", member + "<", member + "[")):
        return f"{base}.properties.{definition}{path[len(member) :]}"
    return f"{base}<nested_stack>.{path}" if path else base


def _known(items: Mapping[str, Any]) -> dict[str, Any]:
    """The values known now (those depending on other resources are left out)."""
    return {k: v for k, v in items.items() if v is not None and _static(v)}


def _static(value: Any) -> bool:
    if isinstance(value, Expr):
        return False
    if isinstance(value, dict):
        return all(_static(v) for v in value.values())
    if isinstance(value, list):
        return all(_static(v) for v in value)
    return True
