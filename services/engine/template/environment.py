"""The stack environment: parameter values, defaults and the resource registry.

Read next to the template (loader -> environment -> stack). `parse_environment`
checks the document; `Environment.resolve_type` maps a type name written in
a template to what implements it: another type name (an alias, possibly
through a `Prefix::*` wildcard or a per-resource override) or a template file
from the request's `files` (a template resource). `event_sinks` and
`encrypted_param_names` are accepted and ignored.

`resource_registry.resources` maps resource names, or fnmatch patterns of
them (`web*`), to settings of those resources, as Heat's does: a type
override (exact names only, as in Heat), `hooks` (breakpoints, see
`hooks_for`), `restricted_actions` (`update`, `replace`: the actions an update
may not take on those resources, see `restricted_actions_for`), and, under a
nested resource's name, a section of the same shape for the resources of its
child stack (`core.nesting.child_environment` hands it down).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from services.engine.template.errors import ErrorList, join_path
from services.engine.template.limits import DEFAULT_LIMITS, Budget, TemplateLimits
from services.engine.template.loader import DocumentError, load_document

_TEMPLATE_SUFFIXES = (".yaml", ".yml", ".template", ".json")
#: Breakpoints Converge honours: the resource's action waits until the hook is cleared.
HOOKS = ("pre-create", "pre-update", "pre-delete")
#: Heat's other hook types, refused with a message saying so (never silently ignored).
UNSUPPORTED_HOOKS = ("post-create", "post-update", "post-delete")
#: The actions `restricted_actions` may forbid (Heat's RESTRICTED_ACTIONS).
RESTRICTED_ACTIONS = ("update", "replace")
#: A Converge-internal section: what `resource_facade` returns in a child stack
#: (its parent resource's metadata, deletion_policy and update_policy).
FACADE_SECTION = "converge_resource_facade"
#: A Converge-internal section of a group's child: the pause between its batches
#: (`core.groups.batches`; the gate in `services.engine.gates` waits it out).
BATCH_PAUSE_SECTION = "converge_batch_pause"
_SECTIONS = frozenset(
    {
        "parameters",
        "parameter_defaults",
        "resource_registry",
        "event_sinks",
        "encrypted_param_names",
        "parameter_merge_strategies",
        FACADE_SECTION,
        BATCH_PAUSE_SECTION,
    }
)


def is_template_reference(type_name: str) -> bool:
    """A type naming a template file: Heat's .yaml/.template, plus .yml/.json."""
    return type_name.endswith(_TEMPLATE_SUFFIXES)


@dataclass(frozen=True)
class ResourceRegistry:
    """Type mappings. Targets are type names or template file names."""

    aliases: Mapping[str, str] = field(default_factory=dict)
    wildcards: tuple[tuple[str, str], ...] = ()  # ("OS::Foo::", "My::Foo::")
    per_resource: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # exact names
    hooks: tuple[tuple[str, frozenset[str]], ...] = ()  # (name pattern, hooks)
    restricted: tuple[tuple[str, frozenset[str]], ...] = ()  # (name pattern, restricted actions)
    resources: Mapping[str, Any] = field(default_factory=dict)  # the section as given (checked)


@dataclass(frozen=True)
class Environment:
    parameters: Mapping[str, Any] = field(default_factory=dict)
    parameter_defaults: Mapping[str, Any] = field(default_factory=dict)
    registry: ResourceRegistry = field(default_factory=ResourceRegistry)
    event_sinks: tuple[Any, ...] = ()
    encrypted_param_names: tuple[str, ...] = ()
    #: In a child stack: what `resource_facade` returns (its parent resource's).
    facade: Mapping[str, Any] = field(default_factory=dict)
    #: In a group's child stack: seconds each member of a later batch waits (its names).
    batch_pause: tuple[float, frozenset[str]] = (0.0, frozenset())

    def pause_before(self, resource_name: str) -> float:
        """Seconds `resource_name` waits before it acts (a group member of a later batch)."""
        seconds, members = self.batch_pause
        return seconds if resource_name in members else 0.0

    def hooks_for(self, resource_name: str) -> frozenset[str]:
        """The hooks set for `resource_name`: those of every `resources` entry whose name
        or pattern matches it (Heat's fnmatch matching)."""
        found: set[str] = set()
        for pattern, hooks in self.registry.hooks:
            if fnmatch.fnmatchcase(resource_name, pattern):
                found |= hooks
        return frozenset(found)

    def restricted_actions_for(self, resource_name: str) -> frozenset[str]:
        """The actions (`update`, `replace`) an update may not take on `resource_name`:
        those of every `resources` entry whose name or pattern matches it (as Heat's
        `get_rsrc_restricted_actions`)."""
        found: set[str] = set()
        for pattern, actions in self.registry.restricted:
            if fnmatch.fnmatchcase(resource_name, pattern):
                found |= actions
        return frozenset(found)

    def resolve_type(self, type_name: str, resource_name: str | None = None) -> str:
        """The type (or template file) `type_name` maps to; ValueError on a loop."""
        seen = [type_name]
        current = type_name
        while True:
            target = self._lookup(current, resource_name)
            if target is None or target == current:
                return current
            if target in seen:
                raise ValueError("resource_registry mapping loop: " + " -> ".join([*seen, target]))
            seen.append(target)
            current = target

    def _lookup(self, type_name: str, resource_name: str | None) -> str | None:
        if resource_name is not None:
            override = self.registry.per_resource.get(resource_name, {}).get(type_name)
            if override is not None:
                return override
        target = self.registry.aliases.get(type_name)
        if target is not None:
            return target
        for prefix, replacement in self.registry.wildcards:
            if type_name.startswith(prefix):
                return replacement + type_name[len(prefix) :]
        return None

    def as_dict(self) -> dict[str, Any]:
        """The environment as Heat shows it (validate / show stack)."""
        registry: dict[str, Any] = dict(self.registry.aliases)
        registry.update({p + "*": r + "*" for p, r in self.registry.wildcards})
        registry["resources"] = dict(self.registry.resources)
        return {
            "parameters": dict(self.parameters),
            "parameter_defaults": dict(self.parameter_defaults),
            "resource_registry": registry,
            "event_sinks": list(self.event_sinks),
            "encrypted_param_names": list(self.encrypted_param_names),
        }


EMPTY_ENVIRONMENT = Environment()


def parse_environment(
    source: str | bytes | Mapping[str, Any] | None, *, limits: TemplateLimits = DEFAULT_LIMITS
) -> Environment:
    """Parse an environment document; raise `TemplateInvalid` with all errors."""
    errors = ErrorList()
    env = read_environment(source, limits=limits, errors=errors)
    errors.raise_if_any()
    return env


def read_environment(
    source: str | bytes | Mapping[str, Any] | Environment | None,
    *,
    limits: TemplateLimits,
    errors: ErrorList,
    budget: Budget | None = None,
) -> Environment:
    """Like `parse_environment` but appends errors; returns what was valid."""
    if source is None:
        return EMPTY_ENVIRONMENT
    if isinstance(source, Environment):
        return source
    if isinstance(source, str | bytes) and not source.strip():
        return EMPTY_ENVIRONMENT
    try:
        data = load_document(source, limits=limits, what="environment", budget=budget)
    except DocumentError as exc:
        errors.add("environment", str(exc))
        return EMPTY_ENVIRONMENT

    def at(*parts: str) -> str:
        path = "environment"
        for part in parts:
            path = join_path(path, part)
        return path

    for key in data:
        if key not in _SECTIONS:
            errors.add(at(key), f"{key!r} is not a valid environment section")
    sections: dict[str, dict[str, Any]] = {}
    for name in ("parameters", "parameter_defaults", "resource_registry"):
        value = data.get(name)
        if value is None:
            value = {}
        if not isinstance(value, dict):
            errors.add(at(name), "must be a map")
            value = {}
        sections[name] = value
    sinks = data.get("event_sinks") or []
    if not isinstance(sinks, list):
        errors.add(at("event_sinks"), "must be a list")
        sinks = []
    encrypted = data.get("encrypted_param_names") or []
    if not isinstance(encrypted, list) or not all(isinstance(n, str) for n in encrypted):
        errors.add(at("encrypted_param_names"), "must be a list of parameter names")
        encrypted = []
    facade = data.get(FACADE_SECTION) or {}
    if not isinstance(facade, dict):
        errors.add(at(FACADE_SECTION), "must be a map")
        facade = {}
    return Environment(
        batch_pause=_batch_pause(data.get(BATCH_PAUSE_SECTION), at(BATCH_PAUSE_SECTION), errors),
        parameters=sections["parameters"],
        parameter_defaults=sections["parameter_defaults"],
        registry=_registry(sections["resource_registry"], at("resource_registry"), errors),
        event_sinks=tuple(sinks),
        encrypted_param_names=tuple(encrypted),
        facade=facade,
    )


def _batch_pause(raw: Any, path: str, errors: ErrorList) -> tuple[float, frozenset[str]]:
    """`{seconds, members}`: the pause the members of a group's later batches wait."""
    if raw is None:
        return 0.0, frozenset()
    seconds, members = (raw.get("seconds"), raw.get("members")) if isinstance(raw, dict) else (None, None)
    if (
        not isinstance(seconds, int | float)
        or isinstance(seconds, bool)
        or seconds < 0
        or not isinstance(members, list)
        or not all(isinstance(m, str) for m in members)
    ):
        errors.add(path, "must be a map of seconds (a number) and members (a list of names)")
        return 0.0, frozenset()
    return float(seconds), frozenset(members)


def _registry(raw: dict[str, Any], path: str, errors: ErrorList) -> ResourceRegistry:
    aliases: dict[str, str] = {}
    wildcards: list[tuple[str, str]] = []
    per_resource: dict[str, dict[str, str]] = {}
    hooks: list[tuple[str, frozenset[str]]] = []
    restricted: list[tuple[str, frozenset[str]]] = []
    resources: dict[str, Any] = {}
    for key, target in raw.items():
        kpath = join_path(path, key)
        if key == "resources":
            if target is None:
                continue
            if not isinstance(target, dict):
                errors.add(kpath, "must be a map of resource name (or pattern) -> its settings")
                continue
            resources = target
            for res_name, settings in target.items():
                spath = join_path(kpath, res_name)
                entry = _per_resource(settings, spath, errors)
                per_resource[res_name] = entry.types
                if entry.hooks:
                    hooks.append((res_name, entry.hooks))
                if entry.restricted:
                    restricted.append((res_name, entry.restricted))
            continue
        if not isinstance(target, str) or not target:
            errors.add(kpath, "must map to a type name or a template file name")
            continue
        if key.endswith("*"):
            if not target.endswith("*"):
                errors.add(kpath, "a wildcard mapping must map to a wildcard ('Prefix::*')")
                continue
            wildcards.append((key[:-1], target[:-1]))
        else:
            aliases[key] = target
    # Longest prefix wins, so specific wildcards beat general ones.
    wildcards.sort(key=lambda pair: len(pair[0]), reverse=True)
    return ResourceRegistry(
        aliases, tuple(wildcards), per_resource, tuple(hooks), tuple(restricted), resources
    )


@dataclass(frozen=True)
class _Entry:
    """What one `resources` entry sets: type overrides, hooks and restricted actions."""

    types: dict[str, str] = field(default_factory=dict)
    hooks: frozenset[str] = frozenset()
    restricted: frozenset[str] = frozenset()


def _per_resource(raw: Any, path: str, errors: ErrorList) -> _Entry:
    """The settings of one `resources` entry. A map value is the section for the
    resources of that resource's child stack (checked the same way)."""
    if raw is None:
        return _Entry()
    if not isinstance(raw, dict):
        errors.add(path, "must be a map")
        return _Entry()
    out: dict[str, str] = {}
    hooks: frozenset[str] = frozenset()
    restricted: frozenset[str] = frozenset()
    for key, target in raw.items():
        kpath = join_path(path, key)
        if key == "hooks":
            hooks = parse_hooks(target, kpath, errors)
        elif key == "restricted_actions":
            restricted = parse_restricted_actions(target, kpath, errors)
        elif target is None:
            continue
        elif isinstance(target, dict):
            _per_resource(target, kpath, errors)  # the child stack's resource `key`
        elif not isinstance(target, str) or not target:
            errors.add(kpath, "must map to a type name or a template file name, or be a map of settings")
        else:
            out[key] = target
    return _Entry(out, hooks, restricted)


def parse_restricted_actions(value: Any, path: str, errors: ErrorList) -> frozenset[str]:
    """A `restricted_actions` value: `update`, `replace` or a list of them."""
    names = value if isinstance(value, list) else [value]
    found: set[str] = set()
    for name in names:
        if name in RESTRICTED_ACTIONS:
            found.add(name)
        else:
            errors.add(
                path,
                f"invalid restricted action {name!r}; valid restricted actions are: "
                + ", ".join(RESTRICTED_ACTIONS),
            )
    return frozenset(found)


def parse_hooks(value: Any, path: str, errors: ErrorList) -> frozenset[str]:
    """A `hooks` value: one hook type or a list of them."""
    names = value if isinstance(value, list) else [value]
    found: set[str] = set()
    for name in names:
        if name in HOOKS:
            found.add(name)
        elif name in UNSUPPORTED_HOOKS:
            errors.add(path, f"hook {name!r} is not supported by Converge (supported: {', '.join(HOOKS)})")
        else:
            errors.add(path, f"invalid hook type {name!r}; acceptable hook types are: {', '.join(HOOKS)}")
    return frozenset(found)
