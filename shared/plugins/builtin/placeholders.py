"""OS::Heat::None and OS::Heat::Value: types that touch nothing outside.

Where they sit: run by the worker like any type, but every action completes
at once.

- `OS::Heat::None` stands in for any other type (map a type to it in the
  environment to disable a resource): it accepts any properties, answers any
  attribute with null, and is never replaced — an update is a no-op.
- `OS::Heat::Value` exposes its `value` property as attribute `value`, after
  checking and converting it to the declared HOT `type` (string, number,
  boolean, json, comma_delimited_list) when one is given.

Physical ids come from the action's idempotency key (see `common`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from pydantic import ConfigDict, model_validator

from shared.plugins.base import (
    ActionContext,
    ActionResult,
    AnyAttributes,
    Observation,
    ObservedState,
    Properties,
    ResourceType,
    prop,
)
from shared.plugins.builtin.common import as_props, physical_name


class AnyProperties(Properties):
    """Accepts and ignores every property (extra keys are kept, never checked)."""

    model_config = ConfigDict(extra="allow", frozen=True)


class NoneResource(ResourceType):
    type_name = "OS::Heat::None"
    description = "Does nothing; accepts any properties and returns null for any attribute."
    properties = AnyProperties
    attributes = AnyAttributes()
    support_version = "5.0.0"

    async def create(self, ctx: ActionContext, props: Properties) -> ActionResult:
        return ActionResult(physical_name(ctx))

    async def update(
        self, ctx: ActionContext, physical_id: str, old: Properties, new: Properties
    ) -> ActionResult:
        return ActionResult(physical_id)

    async def delete(self, ctx: ActionContext, physical_id: str, props: Properties) -> ActionResult:
        return ActionResult(physical_id)


ValueType = Literal["string", "number", "boolean", "json", "comma_delimited_list"]


def _to_number(value: Any) -> int | float:
    if isinstance(value, bool):
        raise ValueError("value is a boolean, not a number")
    if isinstance(value, int | float):
        return value
    if isinstance(value, str):
        for parse in (int, float):
            try:
                return parse(value)
            except ValueError:
                continue
    raise ValueError(f"value {value!r} is not a number")


def _to_boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "t", "yes", "y", "on", "1"):
        return True
    if text in ("false", "f", "no", "n", "off", "0"):
        return False
    raise ValueError(f"value {value!r} is not a boolean")


def _to_json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ValueError(f"value is not valid JSON: {exc}") from exc
    if not isinstance(value, dict | list):
        raise ValueError("value must be a map or a list for type json")
    return value


def _to_list(value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    if isinstance(value, str):
        return [item.strip() for item in value.split(",")] if value else []
    raise ValueError("value must be a list or a comma-separated string")


def _to_string(value: Any) -> str:
    if isinstance(value, dict | list):
        raise ValueError("value is a map or list, not a string")
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "string": _to_string,
    "number": _to_number,
    "boolean": _to_boolean,
    "json": _to_json,
    "comma_delimited_list": _to_list,
}


def coerce_value(value: Any, kind: ValueType | None) -> Any:
    """`value` converted to HOT parameter type `kind` (None: any value). Pure."""
    return value if kind is None else _CONVERTERS[kind](value)


class ValueProperties(Properties):
    value: Any = prop(description='The expression to generate the "value" attribute.')
    type: ValueType | None = prop(None, description='The type of the "value" property.')

    @model_validator(mode="before")
    @classmethod
    def _convert_value(cls, data: Any) -> Any:
        # An unknown `type` is left for the Literal check to report.
        if isinstance(data, dict) and "value" in data and data.get("type") in _CONVERTERS:
            return {**data, "value": _CONVERTERS[data["type"]](data["value"])}
        return data


class ValueResource(ResourceType):
    type_name = "OS::Heat::Value"
    description = "Exposes its value property as an attribute."
    properties = ValueProperties
    attributes = {"value": 'The value of the "value" property, converted to the type given by "type".'}
    support_version = "7.0.0"

    async def create(self, ctx: ActionContext, props: Properties) -> ActionResult:
        mine = as_props(props, ValueProperties)
        return ActionResult(physical_name(ctx), attributes={"value": mine.value})

    async def update(
        self, ctx: ActionContext, physical_id: str, old: Properties, new: Properties
    ) -> ActionResult:
        mine = as_props(new, ValueProperties)
        return ActionResult(physical_id, attributes={"value": mine.value})

    async def delete(self, ctx: ActionContext, physical_id: str, props: Properties) -> ActionResult:
        return ActionResult(physical_id)

    async def observe(self, ctx: ActionContext, physical_id: str, props: Properties) -> Observation:
        mine = as_props(props, ValueProperties)
        return Observation(ObservedState.READY, attributes={"value": mine.value})
