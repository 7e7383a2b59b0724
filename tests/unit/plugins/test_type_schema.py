"""Proves `type_schema` renders Heat's resource_type show shape; pure, real built-in types."""

from __future__ import annotations

from typing import Any

from shared.plugins import Properties, ResourceType, UpdateRule, prop
from shared.plugins.builtin.http_resource import HttpResource
from shared.plugins.builtin.placeholders import NoneResource, ValueResource
from shared.plugins.builtin.random_string import RandomString
from shared.plugins.builtin.testresource import TestResource
from shared.plugins.builtin.wait_condition import WaitCondition
from shared.plugins.registry import type_schema


class Shapes(Properties):
    name: str = prop(description="A name.", update=UpdateRule.REPLACE, min_length=1, max_length=8)
    count: int = prop(3, description="A count.", ge=1, le=9)
    ratio: float | None = prop(None, description="A ratio.")
    enabled: bool = prop(False, description="A switch.")
    tags: list[str] = prop([], description="Tags.")
    extra: dict[str, Any] = prop({}, description="Anything.")
    code: str = prop("a1", description="A code.", pattern=r"[a-z][0-9]")


class ShapeType(ResourceType):
    type_name = "Example::Shapes"
    description = "Every kind of property."
    properties = Shapes
    attributes = {"out": "An output."}
    attribute_types = {"out": "Map"}
    support_version = "1.2.0"


def test_top_level_keys_follow_heat() -> None:
    schema = type_schema(ShapeType)
    assert set(schema) == {"resource_type", "properties", "attributes", "support_status"}
    assert schema["resource_type"] == "Example::Shapes"
    assert schema["support_status"] == {
        "status": "SUPPORTED",
        "version": "1.2.0",
        "message": None,
        "previous_status": None,
    }
    assert schema["attributes"] == {"out": {"description": "An output.", "type": "map"}}


def test_description_is_included_on_request() -> None:
    assert type_schema(ShapeType, with_description=True)["description"] == "Every kind of property."


def test_property_types_map_to_heat_type_names() -> None:
    props = type_schema(ShapeType)["properties"]
    kinds = {name: spec["type"] for name, spec in props.items()}
    assert kinds == {
        "name": "string",
        "count": "integer",
        "ratio": "number",
        "enabled": "boolean",
        "tags": "list",
        "extra": "map",
        "code": "string",
    }


def test_required_default_and_update_rules_are_shown() -> None:
    props = type_schema(ShapeType)["properties"]
    assert props["name"] == {
        "description": "A name.",
        "type": "string",
        "required": True,
        "update_allowed": False,
        "immutable": False,
        "constraints": [{"length": {"min": 1, "max": 8}}],
    }
    assert props["count"]["default"] == 3
    assert props["count"]["required"] is False
    assert props["count"]["update_allowed"] is True
    assert "default" not in props["ratio"]  # a None default is omitted, as in Heat


def test_constraints_render_range_pattern_and_allowed_values() -> None:
    props = type_schema(ShapeType)["properties"]
    assert props["count"]["constraints"] == [{"range": {"min": 1, "max": 9}}]
    assert props["code"]["constraints"] == [{"allowed_pattern": "[a-z][0-9]"}]
    update_method = type_schema(HttpResource)["properties"]["update_method"]
    assert update_method["constraints"] == [{"allowed_values": ["PUT", "PATCH"]}]


def test_list_items_show_their_schema_under_star() -> None:
    props = type_schema(ShapeType)["properties"]
    assert props["tags"]["schema"] == {"*": {"type": "string"}}
    classes = type_schema(RandomString)["properties"]["character_classes"]
    item = classes["schema"]["*"]
    assert item["type"] == "map"
    assert set(item["schema"]) == {"class", "min"}


def test_nested_model_is_a_map_with_schema() -> None:
    waits = type_schema(TestResource)["properties"]["action_wait_secs"]
    assert waits["type"] == "map"
    assert set(waits["schema"]) == {"create", "update", "delete"}
    assert waits["schema"]["create"]["type"] == "number"


def test_heat_testresource_schema_matches_heat_names_and_rules() -> None:
    schema = type_schema(TestResource)
    assert set(schema["properties"]) == {
        "value",
        "fail",
        "update_replace",
        "update_replace_value",
        "wait_secs",
        "action_wait_secs",
        "attr_wait_secs",
        "constraint_prop_secs",
        "client_name",
        "entity_name",
    }
    assert schema["properties"]["value"]["default"] == "test_string"
    assert schema["properties"]["update_replace_value"]["update_allowed"] is False
    assert schema["attributes"]["output"]["type"] == "string"


def test_none_type_lists_no_properties_or_attributes() -> None:
    schema = type_schema(NoneResource)
    assert schema["properties"] == {}
    assert schema["attributes"] == {}


def test_value_property_is_any_and_required() -> None:
    value = type_schema(ValueResource)["properties"]["value"]
    assert value["type"] == "any"
    assert value["required"] is True


def test_wait_condition_timeout_is_required_with_heat_range() -> None:
    timeout = type_schema(WaitCondition)["properties"]["timeout"]
    assert timeout["required"] is True
    assert timeout["constraints"] == [{"range": {"min": 1, "max": 43200}}]
