"""What an update keeps of the stack, with Heat's meaning. Pure.

Where it sits: the API parses an update body (`api.requests.StackBody`);
`goals.parse_goal` (in the template pool) merges a PATCH's documents over
the stack's current goal with `patched_goal_parts`, and
`operations.Operations.update` stores the stack's own settings as
`settings_after` says.

A PATCH (`existing`) keeps what the request omits, as Heat's
`Environment.load` over the stack's environment does: parameters and
parameter defaults are merged per name, the resource registry per entry
(recursively through `resources`; an entry set to null removes it, a
`Prefix::*: null` every `Prefix::...` type mapping of its level), event sinks
are added. `clear_parameters` resets the named parameters (their values are
forgotten, so their defaults apply again), and values of parameters the new
template does not declare are dropped instead of refused. `timeout_mins` and
`disable_rollback` keep their values unless given; `tags` are kept by a
PATCH and replaced by a PUT (none given: none left), as in Heat.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

#: The registry keys that hold a setting, not a type mapping or a nested section.
_SETTINGS = frozenset({"hooks", "restricted_actions"})


def merge_registry(base: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """`new` loaded over `base`, entry by entry, recursively through sections."""
    out: dict[str, Any] = dict(base)
    for key, value in new.items():
        if value is None:
            if key.endswith("*"):
                prefix = key[:-1]
                for name in [n for n, v in out.items() if n.startswith(prefix) and isinstance(v, str)]:
                    del out[name]
            out.pop(key, None)
        elif isinstance(value, Mapping) and key not in _SETTINGS:
            inner = out.get(key)
            out[key] = merge_registry(inner if isinstance(inner, Mapping) else {}, value)
        else:
            out[key] = value
    return out


def merge_environment(base: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The environment a PATCH leaves: `new` (the request's) loaded over `base` (the
    stack's). Sections other than Heat's mergeable ones are replaced when given."""
    out: dict[str, Any] = {**base, **new}
    for section in ("parameters", "parameter_defaults"):
        merged = {**_map(base.get(section)), **_map(new.get(section))}
        if merged or section in base or section in new:
            out[section] = merged
    registry = merge_registry(_map(base.get("resource_registry")), _map(new.get("resource_registry")))
    if registry or "resource_registry" in base or "resource_registry" in new:
        out["resource_registry"] = registry
    sinks = [*_list(base.get("event_sinks")), *_list(new.get("event_sinks"))]
    if sinks:
        out["event_sinks"] = sinks
    return out


def retained(
    values: Mapping[str, Any], *, cleared: Collection[str], declared: Collection[str]
) -> dict[str, Any]:
    """The parameter values a PATCH keeps: not cleared, and declared by the new template."""
    return {k: v for k, v in values.items() if k not in cleared and k in declared}


def patched_parts(
    base_environment: Mapping[str, Any],
    base_parameters: Mapping[str, Any],
    new_environment: Mapping[str, Any],
    new_parameters: Mapping[str, Any],
    *,
    cleared: Collection[str],
    declared: Collection[str],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(environment, parameters) of a PATCH: the stack's, without the cleared
    parameters, with the request's merged over them, keeping only the values of
    parameters the new template declares."""
    kept = {k: v for k, v in _map(base_environment.get("parameters")).items() if k not in cleared}
    environment = merge_environment({**base_environment, "parameters": kept}, new_environment)
    environment["parameters"] = retained(environment.get("parameters") or {}, cleared=(), declared=declared)
    # A value the request's environment gives wins over one an earlier request gave.
    overridden = _map(new_environment.get("parameters"))
    base = {k: v for k, v in base_parameters.items() if k not in cleared and k not in overridden}
    parameters = retained({**base, **new_parameters}, cleared=(), declared=declared)
    return environment, parameters


@dataclass(frozen=True)
class UpdateSettings:
    """What an update body says of the stack's own settings (None: not given)."""

    tags: tuple[str, ...] | None = None
    timeout_mins: int | None = None
    disable_rollback: bool | None = None
    converge: bool = False


@dataclass(frozen=True)
class StackSettings:
    tags: tuple[str, ...]
    timeout_mins: int | None
    disable_rollback: bool


def settings_after(given: UpdateSettings, current: StackSettings, *, patch: bool) -> StackSettings:
    """The stack's settings once an update with `given` starts (Heat's rules)."""
    tags = given.tags if given.tags is not None else (current.tags if patch else ())
    return StackSettings(
        tags=tags,
        timeout_mins=given.timeout_mins if given.timeout_mins is not None else current.timeout_mins,
        disable_rollback=(
            given.disable_rollback if given.disable_rollback is not None else current.disable_rollback
        ),
    )


def _map(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []
