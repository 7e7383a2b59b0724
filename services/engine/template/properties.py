"""Property checks: a resource's compiled properties against its type's schema.

Called by `stack.load_stack` for each enabled resource, and by
`resolve.diff_properties`' callers through `schema_defaults`. Values already
known at load time are type-checked with the plugin's pydantic model;
values that depend on other resources (`Expr` nodes) cannot be checked
before those resources exist, so only their presence counts (unknown and
missing properties are still found). A top-level property whose value is
null counts as not set, as in Heat.
"""

from __future__ import annotations

import contextlib
from functools import lru_cache
from typing import Annotated, Any

from pydantic import TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from services.engine.template.errors import ErrorList, join_path
from services.engine.template.expr import DictExpr, Expr
from services.engine.template.parameters import ParameterSchema
from shared.plugins.base import Properties


def property_items(compiled: Any) -> dict[str, Any] | None:
    """The top-level property map of a compiled tree, None if not a map (yet)."""
    if isinstance(compiled, DictExpr):
        return compiled.items
    if isinstance(compiled, dict):
        return compiled
    return None


def _names(schema: type[Properties]) -> dict[str, str]:
    """Accepted key -> field name (aliases accepted too)."""
    return _names_cached(schema)


@lru_cache(maxsize=1024)
def _names_cached(schema: type[Properties]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, info in schema.model_fields.items():
        out[name] = name
        if info.alias:
            out[info.alias] = name
    return out


@lru_cache(maxsize=4096)
def _adapter(schema: type[Properties], field: str) -> TypeAdapter[Any]:
    info: FieldInfo = schema.model_fields[field]
    annotated: Any = Annotated[info.annotation, info]
    return TypeAdapter(annotated)


def check_properties(
    schema: type[Properties], compiled: Any, *, type_name: str, path: str, errors: ErrorList
) -> None:
    """Report unknown, missing and mistyped properties of one resource."""
    if compiled is None:
        compiled = {}
    items = property_items(compiled)
    if items is None:
        if not isinstance(compiled, Expr):
            errors.add(path, "properties must be a map")
        return
    names = _names(schema)
    fields = schema.model_fields
    open_schema = schema.model_config.get("extra") == "allow"
    present: set[str] = set()
    static: dict[str, Any] = {}
    dynamic = False
    for key, value in items.items():
        field = names.get(key)
        if field is None and open_schema:
            if value is not None and not isinstance(value, Expr):
                static[key] = value
            continue
        if field is None:
            known = ", ".join(sorted(fields)) or "none"
            errors.add(join_path(path, key), f"unknown property for type {type_name} (known: {known})")
            continue
        if value is None:
            continue
        present.add(field)
        if isinstance(value, Expr):
            dynamic = True
        else:
            static[key] = value
    for field, info in fields.items():
        if info.is_required() and field not in present:
            errors.add(join_path(path, field), f"required property missing (type {type_name})")
    if not static:
        return
    if not dynamic:
        try:
            schema.model_validate(static)
        except ValidationError as exc:
            _report(exc, path, errors)
        return
    for key, value in static.items():
        if key not in names:
            continue
        try:
            _adapter(schema, names[key]).validate_python(value)
        except ValidationError as exc:
            _report(exc, join_path(path, key), errors, top=False)


def _report(exc: ValidationError, path: str, errors: ErrorList, *, top: bool = True) -> None:
    for error in exc.errors(include_url=False):
        if error["type"] in ("missing", "extra_forbidden"):
            continue  # reported above, with our wording
        where = path
        for part in error["loc"]:
            where = join_path(where, part if isinstance(part, int) else str(part))
        errors.add(where, error["msg"])


def check_nested_properties(
    parameters: dict[str, ParameterSchema], compiled: Any, *, type_name: str, path: str, errors: ErrorList
) -> None:
    """Template resources: properties are the nested template's parameters."""
    items = property_items({} if compiled is None else compiled)
    if items is None:
        return
    for key in items:
        if key not in parameters:
            errors.add(join_path(path, key), f"unknown property: {type_name} has no parameter {key!r}")
    for name, schema in parameters.items():
        if not schema.has_default and items.get(name) is None:
            errors.add(
                join_path(path, name), f"required property missing ({type_name} parameter without default)"
            )


def schema_defaults(schema: type[Properties]) -> dict[str, Any]:
    """Each optional property's default value (JSON mode)."""
    return dict(_defaults_cached(schema))


@lru_cache(maxsize=1024)
def _defaults_cached(schema: type[Properties]) -> tuple[tuple[str, Any], ...]:
    out: list[tuple[str, Any]] = []
    for name, info in schema.model_fields.items():
        if info.is_required():
            continue
        default = info.get_default(call_default_factory=True)
        with contextlib.suppress(TypeError, ValueError):
            default = TypeAdapter(Any).dump_python(default, mode="json")
        out.append((name, default))
    return tuple(out)
