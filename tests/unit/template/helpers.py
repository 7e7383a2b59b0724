"""Small resource types for the template tests (declarations only, no actions).

They mirror the built-in types' declarations closely enough for the real
Heat templates under tests/templates/ to validate without the plugin registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from services.engine.template import StackIdentity
from shared.plugins.base import Properties, ResourceType, UpdateRule, prop

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
IDENTITY = StackIdentity(stack_name="teststack", stack_id="sid-1", project_id="pid-1")


class ProbeProps(Properties):
    value: str = prop("", description="Value exposed as the 'output' attribute.")
    update_replace: bool = prop(False, description="Replace on update.", update=UpdateRule.REPLACE)
    fail: bool = prop(False, description="Fail the action.")
    action_wait_secs: dict[str, int] = prop(default_factory=dict, description="Per-action waits.")
    wait_secs: float = prop(0, description="Seconds to wait.")
    attr_wait_secs: float = prop(0, description="Seconds to wait for attributes.")
    update_replace_value: str | None = prop(
        None, description="Replaces when changed.", update=UpdateRule.REPLACE
    )
    constraint_prop_secs: float = prop(0, description="Validation delay.")
    client_name: str = prop("", description="Client plugin name.")
    entity_name: str = prop("", description="Entity name.")


class ProbeResource(ResourceType):
    type_name = "OS::Heat::TestResource"
    properties = ProbeProps
    attributes: ClassVar[Mapping[str, str]] = {"output": "The value property."}


class NoneResource(ResourceType):
    type_name = "OS::Heat::None"

    class NoneProps(Properties):
        model_config = {"extra": "allow", "frozen": True}

    properties = NoneProps
    attributes: ClassVar[Mapping[str, str]] = {"*": "Any attribute (always null)."}


class ValueProps(Properties):
    value: Any = prop(description="The value.")
    type: str | None = prop(None, description="Value type.", update=UpdateRule.REPLACE)


class Value(ResourceType):
    type_name = "OS::Heat::Value"
    properties = ValueProps
    attributes: ClassVar[Mapping[str, str]] = {"value": "The value."}


class RandomStringProps(Properties):
    length: int = prop(32, description="Length.", update=UpdateRule.REPLACE, ge=1, le=512)
    salt: str | None = prop(None, description="Change to regenerate.", update=UpdateRule.REPLACE)
    character_classes: list[dict[str, Any]] | None = prop(None, description="Classes.")


class RandomString(ResourceType):
    type_name = "OS::Heat::RandomString"
    properties = RandomStringProps
    attributes: ClassVar[Mapping[str, str]] = {"value": "The random string."}


class WaitHandle(ResourceType):
    type_name = "OS::Heat::WaitConditionHandle"
    attributes: ClassVar[Mapping[str, str]] = {
        "token": "",
        "endpoint": "",
        "curl_cli": "",
        "signal": "",
    }


class WaitConditionProps(Properties):
    handle: str = prop(description="The handle.", update=UpdateRule.REPLACE)
    timeout: int = prop(3600, description="Seconds.", ge=1)
    count: int = prop(1, description="Signals needed.", ge=1)


class WaitCondition(ResourceType):
    type_name = "OS::Heat::WaitCondition"
    properties = WaitConditionProps
    attributes: ClassVar[Mapping[str, str]] = {"data": "Signals' data."}


class HttpProps(Properties):
    url: str = prop(description="URL.", update=UpdateRule.REPLACE)
    method: str = prop("POST", description="Method.")
    body: Any = prop(None, description="Body.")
    headers: dict[str, str] = prop(default_factory=dict, description="Headers.")


class HttpResource(ResourceType):
    type_name = "Converge::HTTP::Resource"
    properties = HttpProps
    attributes: ClassVar[Mapping[str, str]] = {"status": "", "body": "", "id": ""}


TYPES: dict[str, type[ResourceType]] = {
    cls.type_name: cls
    for cls in (ProbeResource, NoneResource, Value, RandomString, WaitHandle, WaitCondition, HttpResource)
}


def real_types() -> dict[str, type[ResourceType]]:
    """The plugin registry's built-in types when present, else the test types."""
    try:
        from shared.plugins.registry import load_types  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return TYPES
    return dict(load_types())


def simulated_data(definition: Any, props: dict[str, Any]) -> Any:
    """What a resource of this type would report after create (deterministic)."""
    from services.engine.template import ResourceData

    name = definition.name
    kind = definition.type
    attributes: dict[str, Any]
    if definition.nested_template is not None:
        attributes = {"name": f"{name}-nested", "OS::stack_id": f"{name}-stack"}
    elif kind == "OS::Heat::TestResource":
        attributes = {"output": props.get("value", "test_string")}
    elif kind == "OS::Heat::Value":
        attributes = {"value": props.get("value")}
    elif kind == "OS::Heat::RandomString":
        attributes = {"value": "R" * int(props.get("length", 32))}
    elif kind == "OS::Heat::WaitConditionHandle":
        attributes = {
            "curl_cli": f"curl -i -X POST http://signal/{name}",
            "endpoint": f"http://signal/{name}",
            "token": "tok",
            "signal": {"url": f"http://signal/{name}"},
        }
    elif kind == "OS::Heat::WaitCondition":
        attributes = {"data": '{"1": "done"}'}
    elif kind == "Converge::HTTP::Resource":
        attributes = {
            "id": "item-1",
            "status": "ACTIVE",
            "body": {**props.get("body", {}), "url": props["url"]},
        }
    else:
        attributes = {}
    return ResourceData(reference_id=f"{name}-id", attributes=attributes)


def converge(stack: Any) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Resolve every resource in dependency order, as the engine would, and the outputs."""
    from services.engine.template import resolve_outputs, resolve_properties

    pending = {name: set(stack.requires(name)) for name in stack.resources}
    ready = sorted(stack.leaves())
    data: dict[str, Any] = {}
    props: dict[str, dict[str, Any]] = {}
    while ready:
        name = ready.pop(0)
        props[name] = resolve_properties(stack, name, data)
        data[name] = simulated_data(stack.resources[name], props[name])
        for user in sorted(stack.dependents(name)):
            pending[user].discard(name)
            if not pending[user] and user not in props and user not in ready:
                ready.append(user)
    assert set(props) == set(stack.resources), "graph did not reach every resource"
    outputs = resolve_outputs(stack, data)
    return props, {k: (v.error if v.error else v.value) for k, v in outputs.items()}
