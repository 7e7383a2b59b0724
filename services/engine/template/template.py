"""Template structure: the sections of a HOT document, checked but not evaluated.

Second step of the flow (loader -> template -> stack). `parse_template` turns a
loaded document into a `Template`: the version, description, parameter
groups, parameter schemas, and the raw snippets of resources, outputs and
conditions. Functions inside snippets are left as written; `stack.load_stack`
compiles them once parameter values and conditions are known.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from services.engine.template.errors import ErrorList, join_path
from services.engine.template.limits import DEFAULT_LIMITS, Budget, TemplateLimits
from services.engine.template.loader import DocumentError, load_document
from services.engine.template.parameters import ParameterSchema, parse_parameter
from services.engine.template.versions import TemplateVersion, known_versions, lookup

_SECTIONS = (
    "heat_template_version",
    "description",
    "parameter_groups",
    "parameters",
    "resources",
    "outputs",
    "conditions",
)
_RESOURCE_KEYS = frozenset(
    {"type", "properties", "metadata", "depends_on", "deletion_policy", "update_policy", "description"}
)
_RESOURCE_KEYS_2016 = _RESOURCE_KEYS | {"condition", "external_id"}


@dataclass(frozen=True)
class ParameterGroup:
    label: str | None
    description: str | None
    parameters: tuple[str, ...]


@dataclass(frozen=True)
class ResourceSnippet:
    """One entry of `resources`, as written (functions not evaluated)."""

    name: str
    type: str
    properties: Any = None
    metadata: Any = None
    depends_on: tuple[str, ...] = ()
    deletion_policy: Any = None
    update_policy: Any = None
    description: str = ""
    condition: Any = None  # None: no condition (always enabled)
    external_id: Any = None

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Python code run per resource while a big stack is unpickled, so the thread
        # unpickling it (the template pool's) lets the event loop's thread run meanwhile.
        self.__dict__.update(state)


@dataclass(frozen=True)
class OutputSnippet:
    name: str
    value: Any
    description: str = ""
    condition: Any = None


@dataclass(frozen=True)
class TemplateHeader:
    """What a loaded stack keeps of its template (`StackDefinition.template`): its
    resources, outputs and conditions live on compiled there, so their snippets are
    not kept twice (in memory, and in every definition the template pool pickles)."""

    version: TemplateVersion
    description: str = ""
    parameter_groups: tuple[ParameterGroup, ...] = ()
    parameters: Mapping[str, ParameterSchema] = field(default_factory=dict)
    has_parameter_groups: bool = False


@dataclass(frozen=True)
class Template:
    """A structurally valid HOT template."""

    version: TemplateVersion
    description: str = ""
    parameter_groups: tuple[ParameterGroup, ...] = ()
    parameters: Mapping[str, ParameterSchema] = field(default_factory=dict)
    resources: Mapping[str, ResourceSnippet] = field(default_factory=dict)
    outputs: Mapping[str, OutputSnippet] = field(default_factory=dict)
    conditions: Mapping[str, Any] = field(default_factory=dict)
    has_parameter_groups: bool = False

    def header(self) -> TemplateHeader:
        """What a loaded stack keeps of this template (`stack.build_stack`)."""
        return TemplateHeader(
            self.version, self.description, self.parameter_groups, self.parameters, self.has_parameter_groups
        )


def parse_template(
    source: str | bytes | Mapping[str, Any], *, limits: TemplateLimits = DEFAULT_LIMITS
) -> Template:
    """Parse and structurally check a template; raise `TemplateInvalid` with all errors."""
    errors = ErrorList()
    template = read_template(source, limits=limits, errors=errors)
    errors.raise_if_any()
    assert template is not None
    return template


def read_template(
    source: str | bytes | Mapping[str, Any],
    *,
    limits: TemplateLimits,
    errors: ErrorList,
    prefix: str = "",
    budget: Budget | None = None,
) -> Template | None:
    """Like `parse_template` but appends errors (paths under `prefix`).

    Returns None only when nothing useful could be read (not a document, no
    or unknown version); otherwise the parts that were valid.
    """
    try:
        data = load_document(source, limits=limits, what="template", budget=budget)
    except DocumentError as exc:
        errors.add(prefix, str(exc))
        return None
    return _read_sections(data, limits, errors, prefix)


def template_of_document(
    data: dict[str, Any], *, limits: TemplateLimits, errors: ErrorList
) -> Template | None:
    """Like `read_template` for a document `load_document` already returned (not
    parsed or measured again, so the `Template` shares its snippets with it)."""
    return _read_sections(data, limits, errors, "")


def _read_sections(
    data: dict[str, Any], limits: TemplateLimits, errors: ErrorList, prefix: str
) -> Template | None:
    def at(*parts: str | int) -> str:
        path = prefix
        for part in parts:
            path = join_path(path, part)
        return path

    raw_version = data.get("heat_template_version")
    if raw_version is None:
        errors.add(
            at("heat_template_version"),
            "missing: a HOT template must start with heat_template_version "
            "(CloudFormation templates are not supported)",
        )
        return None
    version = lookup(raw_version)
    if version is None:
        errors.add(
            at("heat_template_version"),
            f"unknown version {raw_version!r}; supported: {', '.join(known_versions())}",
        )
        return None
    for key in data:
        if key not in _SECTIONS:
            errors.add(at(key), f"{key!r} is not a valid template section")
    if "conditions" in data and not version.has_conditions:
        errors.add(
            at("conditions"),
            f"the conditions section needs version 2016-10-14 or later (template is {version.date})",
        )

    description = data.get("description") or ""
    if not isinstance(description, str):
        errors.add(at("description"), "must be a string")
        description = ""

    parameters: dict[str, ParameterSchema] = {}
    raw_params = _section(data, "parameters", at, errors)
    for name, raw in raw_params.items():
        schema = parse_parameter(name, raw, version, at("parameters", name), errors)
        if schema is not None:
            parameters[name] = schema

    groups = _parameter_groups(data.get("parameter_groups"), raw_params, at, errors)

    resources: dict[str, ResourceSnippet] = {}
    raw_resources = _section(data, "resources", at, errors)
    if len(raw_resources) > limits.max_resources:
        errors.add(
            at("resources"),
            f"too many resources ({len(raw_resources)}; the limit is {limits.max_resources})",
        )
    else:
        allowed = _RESOURCE_KEYS_2016 if version.has_conditions else _RESOURCE_KEYS
        for name, raw in raw_resources.items():
            snippet = _resource(name, raw, allowed, at("resources", name), errors)
            if snippet is not None:
                resources[name] = snippet

    outputs: dict[str, OutputSnippet] = {}
    for name, raw in _section(data, "outputs", at, errors).items():
        output = _output(name, raw, version, at("outputs", name), errors)
        if output is not None:
            outputs[name] = output

    conditions = _section(data, "conditions", at, errors) if version.has_conditions else {}

    return Template(
        version=version,
        description=description,
        parameter_groups=groups,
        parameters=parameters,
        resources=resources,
        outputs=outputs,
        conditions=conditions,
        has_parameter_groups="parameter_groups" in data,
    )


def _section(data: dict[str, Any], name: str, at: Any, errors: ErrorList) -> dict[str, Any]:
    value = data.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        errors.add(at(name), "must be a map")
        return {}
    return value


def _parameter_groups(
    raw: Any, params: Mapping[str, Any], at: Any, errors: ErrorList
) -> tuple[ParameterGroup, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        errors.add(at("parameter_groups"), "must be a list of groups")
        return ()
    seen: dict[str, int] = {}
    groups: list[ParameterGroup] = []
    for index, item in enumerate(raw):
        path = at("parameter_groups", index)
        if not isinstance(item, dict):
            errors.add(path, "each parameter group must be a map")
            continue
        for key in item:
            if key not in ("label", "description", "parameters"):
                errors.add(join_path(path, key), f"unknown parameter group attribute {key!r}")
        names = item.get("parameters")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            errors.add(join_path(path, "parameters"), "must be a list of parameter names")
            continue
        for name in names:
            if name not in params:
                errors.add(join_path(path, "parameters"), f"{name!r} is not a parameter of the template")
            elif name in seen:
                errors.add(
                    join_path(path, "parameters"),
                    f"parameter {name!r} is already in group {seen[name]}; a parameter "
                    "belongs to one group only",
                )
            else:
                seen[name] = index
        label, description = item.get("label"), item.get("description")
        groups.append(
            ParameterGroup(
                label=label if isinstance(label, str) else None,
                description=description if isinstance(description, str) else None,
                parameters=tuple(names),
            )
        )
    return tuple(groups)


def _resource(
    name: str, raw: Any, allowed: frozenset[str], path: str, errors: ErrorList
) -> ResourceSnippet | None:
    ok = True
    if "/" in name or not name:
        errors.add(path, "a resource name must be non-empty and must not contain '/'")
        ok = False
    if not isinstance(raw, dict):
        errors.add(path, "each resource must be a map with at least a 'type'")
        return None
    for key in raw:
        if key not in allowed:
            errors.add(join_path(path, key), f"{key!r} is not a valid keyword inside a resource definition")
    rtype = raw.get("type")
    if not isinstance(rtype, str) or not rtype:
        errors.add(join_path(path, "type"), "missing or not a string: every resource needs a type")
        ok = False
    depends_on: tuple[str, ...] = ()
    raw_deps = raw.get("depends_on")
    if isinstance(raw_deps, str):
        depends_on = (raw_deps,)
    elif isinstance(raw_deps, list) and all(isinstance(d, str) for d in raw_deps):
        depends_on = tuple(raw_deps)
    elif raw_deps is not None:
        errors.add(join_path(path, "depends_on"), "must be a resource name or a list of names")
    description = raw.get("description") or ""
    if not isinstance(description, str):
        errors.add(join_path(path, "description"), "must be a string")
        description = ""
    if not ok or not isinstance(rtype, str):
        return None
    return ResourceSnippet(
        name=name,
        type=rtype,
        properties=raw.get("properties"),
        metadata=raw.get("metadata"),
        depends_on=depends_on,
        deletion_policy=raw.get("deletion_policy"),
        update_policy=raw.get("update_policy"),
        description=description,
        condition=raw.get("condition"),
        external_id=raw.get("external_id"),
    )


def _output(
    name: str, raw: Any, version: TemplateVersion, path: str, errors: ErrorList
) -> OutputSnippet | None:
    if not isinstance(raw, dict) or "value" not in raw:
        errors.add(path, "each output must be a map with a 'value'")
        return None
    allowed = {"value", "description"} | ({"condition"} if version.has_conditions else set())
    for key in raw:
        if key not in allowed:
            errors.add(join_path(path, key), f"{key!r} is not a valid keyword inside an output definition")
    description = raw.get("description") or ""
    if not isinstance(description, str):
        errors.add(join_path(path, "description"), "must be a string")
        description = ""
    return OutputSnippet(name, raw["value"], description, raw.get("condition"))
