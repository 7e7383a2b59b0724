"""A resource type's declarations rendered in Heat's `resource_type show` shape.

Where it sits: the engine's API answers `GET /v1/{project}/resource_types/{type}`
with `type_schema(cls)`; the registry also renders every type once at load
time so a plugin whose declarations cannot be described fails early. Pure:
it reads the pydantic property model and the ClassVars, nothing else.

Shape (as Heat's API reference shows it)::

    {"resource_type": "OS::Heat::RandomString",
     "properties": {"length": {"type": "integer", "description": "...",
                               "required": false, "default": 32,
                               "update_allowed": false, "immutable": false,
                               "constraints": [{"range": {"min": 1, "max": 512}}]}},
     "attributes": {"value": {"description": "...", "type": "string"}},
     "support_status": {"status": "SUPPORTED", "version": "2014.1",
                        "message": null, "previous_status": null}}

Heat names property types String/Integer/Number/Boolean/Map/List (and Any)
and its API serialises them lower-case; so does this. Keys with no value
(`default`, `constraints`, nested `schema`) are omitted, as Heat does.
"""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined, to_jsonable_python

from shared.plugins.base import Properties, ResourceType, UpdateRule, update_rule

_SCALARS: dict[type, str] = {bool: "boolean", int: "integer", float: "number", str: "string"}


def type_schema(cls: type[ResourceType], *, with_description: bool = False) -> dict[str, Any]:
    """Heat's resource-type schema of `cls`."""
    result: dict[str, Any] = {
        "resource_type": cls.type_name,
        "properties": properties_schema(cls.properties),
        "attributes": {
            name: _attribute(description, cls.attribute_types.get(name))
            for name, description in cls.attributes.items()
        },
        "support_status": {
            "status": "SUPPORTED",
            "version": cls.support_version,
            "message": None,
            "previous_status": None,
        },
    }
    if with_description:
        result["description"] = cls.description
    return result


def properties_schema(model: type[Properties]) -> dict[str, Any]:
    """Heat property schemas of every field of `model`, by template name."""
    return {
        field.alias or name: _property(field, update_rule(model, name) is UpdateRule.IN_PLACE)
        for name, field in model.model_fields.items()
    }


def _attribute(description: str, heat_type: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"description": description}
    if heat_type:
        out["type"] = heat_type.lower()
    return out


def _property(field: FieldInfo, update_allowed: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"description": field.description or ""}
    out.update(_describe(field.annotation, update_allowed))
    out["required"] = field.is_required()
    default = _default(field)
    if default is not None:
        out["default"] = default
    out["update_allowed"] = update_allowed
    out["immutable"] = False
    constraints = out.pop("constraints", []) + _constraints(field.metadata)
    if constraints:
        out["constraints"] = constraints
    return out


def _default(field: FieldInfo) -> Any:
    if field.default_factory is not None:
        return to_jsonable_python(field.default_factory())  # type: ignore[call-arg]
    if field.default is PydanticUndefined:
        return None
    return to_jsonable_python(field.default)


def _describe(annotation: Any, update_allowed: bool) -> dict[str, Any]:
    """`type`, and where it applies nested `schema` or `allowed_values`."""
    annotation = _strip_optional(annotation)
    origin = get_origin(annotation)
    if annotation is Any or annotation is None:
        return {"type": "any"}
    if origin is Literal:
        values = list(get_args(annotation))
        kinds = {_SCALARS.get(type(v), "string") for v in values}
        kind = kinds.pop() if len(kinds) == 1 else "string"
        return {"type": kind, "constraints": [{"allowed_values": values}]}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        nested = {f.alias or n: _property(f, update_allowed) for n, f in annotation.model_fields.items()}
        return {"type": "map", "schema": nested}
    if _is_union(annotation):
        members = {_describe(a, update_allowed)["type"] for a in get_args(annotation)}
        return {"type": "number" if members <= {"integer", "number"} else "any"}
    container = origin if origin is not None else annotation
    if isinstance(container, type):
        if container in _SCALARS:
            return {"type": _SCALARS[container]}
        if issubclass(container, Mapping):
            return {"type": "map"}
        if issubclass(container, Sequence | set | frozenset) and not issubclass(container, str):
            args = get_args(annotation)
            item = _describe(args[0], update_allowed) if args else None
            out: dict[str, Any] = {"type": "list"}
            if item is not None and item["type"] != "any":
                out["schema"] = {"*": item}
            return out
    return {"type": "any"}


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType)


def _strip_optional(annotation: Any) -> Any:
    if _is_union(annotation):
        members = [a for a in get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return members[0]
        if len(members) < len(get_args(annotation)):
            return Union[tuple(members)]  # noqa: UP007 - rebuilt from a runtime tuple
    return annotation


def _constraints(metadata: list[Any]) -> list[dict[str, Any]]:
    """Heat constraints from pydantic/annotated-types field metadata."""
    value_range: dict[str, Any] = {}
    length: dict[str, Any] = {}
    out: list[dict[str, Any]] = []
    for item in metadata:
        if isinstance(item, annotated_types.Ge | annotated_types.Gt):
            value_range["min"] = item.ge if isinstance(item, annotated_types.Ge) else item.gt
        elif isinstance(item, annotated_types.Le | annotated_types.Lt):
            value_range["max"] = item.le if isinstance(item, annotated_types.Le) else item.lt
        elif isinstance(item, annotated_types.MinLen):
            length["min"] = item.min_length
        elif isinstance(item, annotated_types.MaxLen):
            length["max"] = item.max_length
        elif isinstance(getattr(item, "pattern", None), str):
            out.append({"allowed_pattern": item.pattern})
    if value_range:
        out.insert(0, {"range": value_range})
    if length:
        out.insert(0, {"length": length})
    return out
