"""Template parameters: schema parsing, value coercion and constraints.

`template.parse_template` calls `parse_parameter` for each entry of the
`parameters` section; `stack.load_stack` calls `parameter_values` to pick each
value by Heat's precedence (request > environment `parameters` >
environment `parameter_defaults` > template `default`), coerce it to the
declared type and check the constraints.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from services.engine.template.constraints import Constraint, ParamType, parse_constraints
from services.engine.template.errors import ErrorList, join_path
from services.engine.template.versions import TemplateVersion

_TRUE = frozenset({"t", "true", "on", "y", "yes", "1"})
_FALSE = frozenset({"f", "false", "off", "n", "no", "0"})

_BASE_KEYS = frozenset({"type", "label", "description", "default", "hidden", "constraints", "immutable"})


@dataclass(frozen=True)
class ParameterSchema:
    name: str
    type: ParamType
    label: str | None = None
    description: str | None = None
    has_default: bool = False
    default: Any = None  # coerced to `type`; meaningful only if has_default
    hidden: bool = False
    immutable: bool = False
    constraints: tuple[Constraint, ...] = ()
    tags: tuple[str, ...] = ()
    invalid: bool = False  # the definition had errors (already reported)


def coerce(ptype: ParamType, value: Any) -> Any:
    """`value` converted to `ptype` as Heat does, or ValueError saying why."""
    if ptype is ParamType.STRING:
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int | float):
            return str(value)
        raise ValueError(f"value must be a string, not {type(value).__name__}")
    if ptype is ParamType.NUMBER:
        if isinstance(value, bool):
            raise ValueError("value must be a number, not a boolean")
        if isinstance(value, int | float):
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError("value must be a finite number")
            return value
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
            try:
                number = float(value)
            except ValueError:
                raise ValueError(f"value {value!r} is not a number") from None
            if not math.isfinite(number):
                raise ValueError(f"value {value!r} is not a finite number")
            return number
        raise ValueError(f"value must be a number, not {type(value).__name__}")
    if ptype is ParamType.BOOLEAN:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower() if isinstance(value, str | int) else None
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ValueError(f"value {value!r} is not a boolean")
    if ptype is ParamType.COMMA_DELIMITED_LIST:
        if isinstance(value, list):
            return [coerce(ParamType.STRING, item) for item in value]
        if isinstance(value, str):
            return value.split(",") if value else []
        raise ValueError(f"value must be a list or a comma-delimited string, not {type(value).__name__}")
    # JSON
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except (json.JSONDecodeError, RecursionError):
            raise ValueError("value is not valid JSON") from None
    if isinstance(value, dict | list):
        return value
    raise ValueError("value must be a JSON map or list")


def parse_parameter(
    name: str, raw: Any, version: TemplateVersion, path: str, errors: ErrorList
) -> ParameterSchema | None:
    """Read one entry of the `parameters` section; None if unusable."""
    before = len(errors)
    schema = _parse_parameter(name, raw, version, path, errors)
    if schema is not None and len(errors) > before:
        schema = dataclasses.replace(schema, invalid=True)
    return schema


def _parse_parameter(
    name: str, raw: Any, version: TemplateVersion, path: str, errors: ErrorList
) -> ParameterSchema | None:
    if not isinstance(raw, dict):
        errors.add(path, "each parameter must be a map with at least a 'type'")
        return None
    allowed = _BASE_KEYS | ({"tags"} if version.parameter_tags else frozenset())
    for key in raw:
        if key not in allowed:
            errors.add(join_path(path, key), f"unknown parameter attribute {key!r}")
    raw_type = raw.get("type")
    if raw_type is None:
        errors.add(path, "missing 'type'")
        return None
    try:
        ptype = ParamType(raw_type)
    except ValueError:
        errors.add(
            join_path(path, "type"),
            f"invalid type {raw_type!r} (one of: {', '.join(t.value for t in ParamType)})",
        )
        return None
    texts: dict[str, str | None] = {}
    for key in ("label", "description"):
        value = raw.get(key)
        if value is not None and not isinstance(value, str):
            errors.add(join_path(path, key), "must be a string")
            value = None
        texts[key] = value
    flags: dict[str, bool] = {}
    for key in ("hidden", "immutable"):
        value = raw.get(key, False)
        try:
            flags[key] = coerce(ParamType.BOOLEAN, value)
        except ValueError:
            errors.add(join_path(path, key), "must be a boolean")
            flags[key] = False
    constraints = parse_constraints(raw.get("constraints"), ptype, version, path, errors)
    tags: tuple[str, ...] = ()
    raw_tags = raw.get("tags")
    if raw_tags is not None:
        if isinstance(raw_tags, list) and all(isinstance(t, str) for t in raw_tags):
            tags = tuple(raw_tags)
        else:
            errors.add(join_path(path, "tags"), "must be a list of strings")
    schema = ParameterSchema(
        name=name,
        type=ptype,
        label=texts["label"],
        description=texts["description"],
        hidden=flags["hidden"],
        immutable=flags["immutable"],
        constraints=constraints,
        tags=tags,
    )
    if "default" in raw and raw["default"] is not None:
        default = check_value(schema, raw["default"], join_path(path, "default"), errors)
        if default is not _INVALID:
            return dataclasses.replace(schema, has_default=True, default=default)
    return schema


class _Invalid:
    """Marker: the value was reported invalid."""


_INVALID: Any = _Invalid()


def check_value(schema: ParameterSchema, value: Any, path: str, errors: ErrorList) -> Any:
    """Coerce and constraint-check `value`; report problems; _INVALID if any."""
    try:
        coerced = coerce(schema.type, value)
    except ValueError as exc:
        errors.add(path, f"{exc} (parameter {schema.name!r} is a {schema.type.value})")
        return _INVALID
    ok = True
    for constraint in schema.constraints:
        problem = constraint.violation(coerced, schema.type)
        if problem is not None:
            errors.add(path, problem)
            ok = False
    return coerced if ok else _INVALID


def parameter_values(
    schemas: Mapping[str, ParameterSchema],
    *,
    request: Mapping[str, Any],
    env_parameters: Mapping[str, Any],
    env_defaults: Mapping[str, Any],
    require_values: bool,
    errors: ErrorList,
) -> dict[str, Any]:
    """The value of each parameter, by precedence. Missing values are errors
    when `require_values`, else left out (template validation only)."""
    for name in request:
        if name not in schemas:
            errors.add(join_path("parameters", name), f"parameter {name!r} is not defined in the template")
    for name in env_parameters:
        if name not in schemas and name not in request:
            errors.add(
                join_path("environment.parameters", name),
                f"parameter {name!r} is not defined in the template",
            )
    values: dict[str, Any] = {}
    for name, schema in schemas.items():
        path = join_path("parameters", name)
        source = value_source(name, request=request, env_parameters=env_parameters, env_defaults=env_defaults)
        if name in request:
            raw = request[name]
        elif name in env_parameters:
            raw = env_parameters[name]
        elif name in env_defaults:
            raw = env_defaults[name]
        elif schema.has_default:
            values[name] = schema.default
            continue
        else:
            if require_values and not schema.invalid:
                errors.add(path, f"parameter {name!r} has no value and no default")
            continue
        value = check_value(schema, raw, source, errors)
        if value is not _INVALID:
            values[name] = value
    return values


def value_source(
    name: str,
    *,
    request: Mapping[str, Any],
    env_parameters: Mapping[str, Any],
    env_defaults: Mapping[str, Any],
) -> str:
    """Where a parameter's value comes from, by precedence (the path errors name):
    the request, the environment's `parameters`, its `parameter_defaults`, else the
    template (`parameters.<name>`, its default if it has one)."""
    if name in request:
        return join_path("parameters", name)
    if name in env_parameters:
        return join_path("environment.parameters", name)
    if name in env_defaults:
        return join_path("environment.parameter_defaults", name)
    return join_path("parameters", name)
