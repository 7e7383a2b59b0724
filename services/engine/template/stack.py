"""Loading a stack: template + environment + parameters + types -> StackDefinition.

The entry point the API and the convergence engine call before anything
changes (loader -> template/environment -> here -> resolve). It picks the
parameter values and checks their custom constraints (`custom_constraints`;
what was accepted unchecked is kept on the definition), evaluates conditions,
maps types through the registry, compiles every enabled resource and output
once, checks properties against the plugins' schemas, builds the dependency
graph and finds cycles. Every
problem is collected; one `TemplateInvalid` reports them all. One evaluation
`Budget` covers the whole load (documents, nested template files, functions);
running out of it raises `BudgetExceeded` at once.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from typing import Any

from services.engine.template.compiler import Compiler
from services.engine.template.conditions import Conditions, ParamScope
from services.engine.template.custom_constraints import (
    DEFAULT_CONSTRAINTS,
    CustomConstraints,
    check_custom_constraints,
)
from services.engine.template.definition import (
    DeletionPolicy,
    OutputDefinition,
    ResourceDefinition,
    StackDefinition,
    StackIdentity,
    UncheckedValue,
)
from services.engine.template.environment import Environment, is_template_reference, read_environment
from services.engine.template.errors import ErrorList, join_path
from services.engine.template.expr import OMIT, Expr
from services.engine.template.graph import find_cycles, reverse_edges
from services.engine.template.limits import DEFAULT_LIMITS, Budget, TemplateLimits
from services.engine.template.parameters import parameter_values, value_source
from services.engine.template.properties import check_nested_properties, check_properties
from services.engine.template.template import ResourceSnippet, Template, read_template
from shared.plugins.base import ResourceType
from shared.plugins.constraints import ConstraintContext

TypeTable = Mapping[str, type[ResourceType]]
#: A type whose `attributes` contains this key accepts any attribute name
#: (so does `shared.plugins.base.AnyAttributes`, which contains every name).
ANY_ATTRIBUTE = "*"
#: Attribute every template resource has besides its outputs.
_NESTED_ATTRIBUTES = frozenset({"OS::stack_id"})


def load_stack(
    template: Template | str | bytes | Mapping[str, Any],
    *,
    environment: Environment | str | bytes | Mapping[str, Any] | None = None,
    parameters: Mapping[str, Any] | None = None,
    files: Mapping[str, str] | None = None,
    types: TypeTable,
    identity: StackIdentity,
    limits: TemplateLimits = DEFAULT_LIMITS,
    custom_constraints: CustomConstraints | None = DEFAULT_CONSTRAINTS,
    budget: Budget | None = None,
    now: datetime | None = None,
) -> StackDefinition:
    """Validate everything and return the stack; raise `TemplateInvalid` listing all errors
    (or `BudgetExceeded` when evaluating needs more than `budget`, by default one of
    `limits`). `custom_constraints` None: a stored goal, whose custom constraints were
    checked when it was stored, is not checked again (`now`: see `build_stack`)."""
    errors = ErrorList()
    stack = build_stack(
        template,
        environment=environment,
        parameters=parameters,
        files=files,
        types=types,
        identity=identity,
        limits=limits,
        custom_constraints=custom_constraints,
        require_values=True,
        errors=errors,
        budget=budget,
        now=now,
    )
    errors.raise_if_any()
    assert stack is not None
    return stack


def build_stack(
    template: Template | str | bytes | Mapping[str, Any],
    *,
    environment: Environment | str | bytes | Mapping[str, Any] | None,
    parameters: Mapping[str, Any] | None,
    files: Mapping[str, str] | None,
    types: TypeTable,
    identity: StackIdentity,
    limits: TemplateLimits,
    custom_constraints: CustomConstraints | None,
    require_values: bool,
    errors: ErrorList,
    budget: Budget | None = None,
    now: datetime | None = None,
) -> StackDefinition | None:
    """`load_stack` without raising: errors are appended; None if unreadable.

    With `require_values=False` (template validation) parameters without a
    value are allowed; what depends on them is not checked. Custom constraints
    are checked against `custom_constraints` (None: not at all) as of `now`
    (default: the current time).
    """
    if budget is None:
        budget = Budget(limits)
    tmpl = (
        template
        if isinstance(template, Template)
        else read_template(template, limits=limits, errors=errors, budget=budget)
    )
    env = read_environment(environment, limits=limits, errors=errors, budget=budget)
    if tmpl is None:
        return None
    files = files or {}
    loader = _StackLoader(tmpl, env, files, types, limits, errors, budget)
    loader.check_registry()
    request = parameters or {}
    values = parameter_values(
        tmpl.parameters,
        request=request,
        env_parameters=env.parameters,
        env_defaults=env.parameter_defaults,
        require_values=require_values,
        errors=errors,
    )
    unchecked: tuple[UncheckedValue, ...] = ()
    if custom_constraints is not None:
        sources = {
            name: value_source(
                name, request=request, env_parameters=env.parameters, env_defaults=env.parameter_defaults
            )
            for name in values
        }
        unchecked = check_custom_constraints(
            tmpl.parameters,
            values,
            sources,
            registry=custom_constraints,
            context=ConstraintContext(now=now or datetime.now(UTC)),
            by_value=require_values,
            errors=errors,
        )
    pseudo = {
        "OS::stack_name": identity.stack_name,
        "OS::stack_id": identity.stack_id,
        "OS::project_id": identity.project_id,
    }
    scope = ParamScope(values, pseudo, frozenset(tmpl.parameters))
    conditions = Conditions(tmpl.conditions, version=tmpl.version, scope=scope, errors=errors, budget=budget)
    condition_values = conditions.evaluate_all()
    enabled = {
        name: snippet.condition is None
        or conditions.evaluate(snippet.condition, join_path(join_path("resources", name), "condition"))
        for name, snippet in tmpl.resources.items()
    }
    attributes = {name: loader.resolve_type(tmpl.resources[name]) for name, on in enabled.items() if on}
    compiler = Compiler(
        version=tmpl.version,
        scope=scope,
        files=files,
        conditions=conditions,
        resources=enabled,
        attributes=attributes,
        errors=errors,
        budget=budget,
        facade=env.facade,
    )
    resources = {
        name: loader.resource(tmpl.resources[name], compiler, enabled) for name, on in enabled.items() if on
    }
    requires = {name: r.requires for name, r in resources.items()}
    for cycle in find_cycles(requires):
        errors.add(join_path("resources", cycle[0]), "dependency cycle: " + " -> ".join(cycle))
    outputs: dict[str, OutputDefinition] = {}
    for name, snippet in tmpl.outputs.items():
        path = join_path("outputs", name)
        on = snippet.condition is None or conditions.evaluate(snippet.condition, join_path(path, "condition"))
        if not on:
            outputs[name] = OutputDefinition(name, None, snippet.description, enabled=False)
            continue
        refs: set[str] = set()
        value = compiler.compile(snippet.value, join_path(path, "value"), refs)
        outputs[name] = OutputDefinition(
            name, None if value is OMIT else value, snippet.description, True, frozenset(refs)
        )
    return StackDefinition(
        template=tmpl.header(),
        environment=env,
        identity=identity,
        parameters=values,
        conditions=condition_values,
        resources=resources,
        outputs=outputs,
        disabled=frozenset(n for n, on in enabled.items() if not on),
        _dependents=reverse_edges(requires),
        limits=limits,
        unchecked=unchecked,
    )


class _StackLoader:
    """Per-load helpers that need the template, environment, files and types."""

    def __init__(
        self,
        tmpl: Template,
        env: Environment,
        files: Mapping[str, str],
        types: TypeTable,
        limits: TemplateLimits,
        errors: ErrorList,
        budget: Budget,
    ) -> None:
        self.tmpl = tmpl
        self.env = env
        self.files = files
        self.types = types
        self.limits = limits
        self.errors = errors
        self.budget = budget
        self._nested: dict[str, Template | None] = {}
        self._types: dict[str, str] = {}  # resource name -> resolved type

    def check_registry(self) -> None:
        """Every template file the registry maps to must exist and parse."""
        base = "environment.resource_registry"
        for key, target in self.env.registry.aliases.items():
            if is_template_reference(target):
                self.nested(target, join_path(base, key))
        for res_name, mapping in self.env.registry.per_resource.items():
            for key, target in mapping.items():
                if is_template_reference(target):
                    self.nested(target, join_path(join_path(join_path(base, "resources"), res_name), key))

    def nested(self, file_name: str, path: str) -> Template | None:
        if file_name in self._nested:
            return self._nested[file_name]
        content = self.files.get(file_name)
        parsed: Template | None = None
        if content is None:
            self.errors.add(path, f"template file {file_name!r} is not in the request's files")
        else:
            parsed = read_template(
                content,
                limits=self.limits,
                errors=self.errors,
                prefix=join_path("files", file_name),
                budget=self.budget,
            )
        self._nested[file_name] = parsed
        return parsed

    def resolve_type(self, snippet: ResourceSnippet) -> Collection[str] | None:
        """Map the type through the registry; return its attribute names (None: any)."""
        path = join_path(join_path("resources", snippet.name), "type")
        try:
            resolved = self.env.resolve_type(snippet.type, snippet.name)
        except ValueError as exc:
            self.errors.add(path, str(exc))
            return None
        self._types[snippet.name] = resolved
        if is_template_reference(resolved):
            nested = self.nested(resolved, path)
            return None if nested is None else frozenset(nested.outputs) | _NESTED_ATTRIBUTES
        cls = self.types.get(resolved)
        if cls is None:
            shown = f" (mapped from {snippet.type!r})" if resolved != snippet.type else ""
            close = difflib.get_close_matches(resolved, list(self.types), n=3, cutoff=0.85)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            self.errors.add(path, f"unknown resource type {resolved!r}{shown}{hint}")
            return None
        declared = cls.attributes
        return None if ANY_ATTRIBUTE in declared else declared

    def resource(
        self, snippet: ResourceSnippet, compiler: Compiler, enabled: Mapping[str, bool]
    ) -> ResourceDefinition:
        name = snippet.name
        path = join_path("resources", name)
        refs: set[str] = set()
        properties = compiler.compile(snippet.properties, join_path(path, "properties"), refs)
        if properties is OMIT:
            properties = None
        metadata = compiler.compile(snippet.metadata, join_path(path, "metadata"), refs)
        if metadata is OMIT:
            metadata = None
        if metadata is not None and not isinstance(metadata, dict | Expr):
            self.errors.add(join_path(path, "metadata"), "must be a map")
        references = frozenset(refs)
        depends_on: list[str] = []
        for dep in snippet.depends_on:
            on = enabled.get(dep)
            if on is None:
                self.errors.add(join_path(path, "depends_on"), f"unknown resource {dep!r}")
            elif on:  # Heat ignores dependencies on resources disabled by conditions
                depends_on.append(dep)
                refs.add(dep)
        policy = self._deletion_policy(snippet, compiler, path)
        update_policy = self._static(snippet.update_policy, compiler, join_path(path, "update_policy"))
        if update_policy is None:
            update_policy = {}
        elif not isinstance(update_policy, dict):
            self.errors.add(join_path(path, "update_policy"), "must be a map")
            update_policy = {}
        external_id = self._static(snippet.external_id, compiler, join_path(path, "external_id"))
        if external_id is not None:
            if not isinstance(external_id, str):
                self.errors.add(join_path(path, "external_id"), "must be a string")
                external_id = None
            elif snippet.depends_on:
                self.errors.add(
                    join_path(path, "depends_on"),
                    "a resource with an external_id cannot have depends_on",
                )
        resolved_type = self._types.get(name, snippet.type)
        nested_file = resolved_type if is_template_reference(resolved_type) else None
        props_path = join_path(path, "properties")
        if nested_file is not None:
            nested = self._nested.get(nested_file)
            if nested is not None:
                check_nested_properties(
                    dict(nested.parameters),
                    properties,
                    type_name=resolved_type,
                    path=props_path,
                    errors=self.errors,
                )
        else:
            cls = self.types.get(resolved_type)
            if cls is not None:
                check_properties(
                    cls.properties,
                    properties,
                    type_name=resolved_type,
                    path=props_path,
                    errors=self.errors,
                )
        return ResourceDefinition(
            name=name,
            type=resolved_type,
            template_type=snippet.type,
            properties=properties,
            metadata=metadata,
            requires=frozenset(refs),
            depends_on=tuple(depends_on),
            deletion_policy=policy,
            update_policy=update_policy,
            external_id=external_id,
            description=snippet.description,
            nested_template=nested_file,
            references=references,
        )

    def _static(self, raw: Any, compiler: Compiler, path: str) -> Any:
        if raw is None:
            return None
        refs: set[str] = set()
        value = compiler.compile(raw, path, refs)
        if isinstance(value, Expr):
            if refs:
                self.errors.add(path, "must not depend on other resources")
            return None
        return None if value is OMIT else value

    def _deletion_policy(self, snippet: ResourceSnippet, compiler: Compiler, path: str) -> DeletionPolicy:
        ppath = join_path(path, "deletion_policy")
        value = self._static(snippet.deletion_policy, compiler, ppath)
        if value is None:
            return DeletionPolicy.DELETE
        lowercase = self.tmpl.version.lowercase_deletion_policy
        names = {"Delete": DeletionPolicy.DELETE, "Retain": DeletionPolicy.RETAIN}
        if lowercase:
            names |= {"delete": DeletionPolicy.DELETE, "retain": DeletionPolicy.RETAIN}
        if isinstance(value, str) and value in names:
            return names[value]
        if value == "Snapshot" or (lowercase and value == "snapshot"):
            resolved = self._types.get(snippet.name, snippet.type)
            cls = self.types.get(resolved)
            if cls is not None and cls.supports_snapshot:
                return DeletionPolicy.SNAPSHOT
            self.errors.add(
                ppath,
                f'"Snapshot" deletion policy not supported by {resolved} (it takes no snapshots); '
                "use Delete or Retain",
            )
        else:
            self.errors.add(ppath, f"invalid deletion policy {value!r} (Delete, Retain or Snapshot)")
        return DeletionPolicy.DELETE
