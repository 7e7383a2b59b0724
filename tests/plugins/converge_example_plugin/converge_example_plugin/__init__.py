"""Example::Thing, a third-party resource type living outside Converge.

It exists so tests can prove that a package installed beside Converge
registers types through the `converge.resources` entry-point group, and custom
constraints through `converge.constraints`, exactly as the built-ins do. A thing
has a name and a size; changing the name replaces it, changing the size updates
it in place. `example.thing_name` checks a parameter holds a thing name.
"""

from __future__ import annotations

from shared.plugins import (
    ActionContext,
    ActionResult,
    Properties,
    ResourceType,
    UpdateRule,
    prop,
)


class ThingProperties(Properties):
    name: str = prop(description="Name of the thing.", update=UpdateRule.REPLACE)
    size: int = prop(1, description="Size of the thing.", ge=1)


class Thing(ResourceType):
    type_name = "Example::Thing"
    description = "A thing that exists only in the plugin's imagination."
    properties = ThingProperties
    attributes = {"label": "The thing's name and size, e.g. 'box (3)'."}
    attribute_types = {"label": "String"}

    async def create(self, ctx: ActionContext, props: Properties) -> ActionResult:
        assert isinstance(props, ThingProperties)
        return ActionResult(
            f"thing-{ctx.idempotency_key}", attributes={"label": f"{props.name} ({props.size})"}
        )

    async def update(
        self, ctx: ActionContext, physical_id: str, old: Properties, new: Properties
    ) -> ActionResult:
        assert isinstance(new, ThingProperties)
        return ActionResult(physical_id, attributes={"label": f"{new.name} ({new.size})"})

    async def delete(self, ctx: ActionContext, physical_id: str, props: Properties) -> ActionResult:
        return ActionResult(physical_id)


def thing_name(value: object, context: object) -> str | None:
    """The `example.thing_name` custom constraint: a thing's name is lower-case words
    joined by '-' (registered through `converge.constraints`)."""
    words = value.split("-") if isinstance(value, str) else []
    if words and all(w.isascii() and w.isalpha() and w.islower() for w in words):
        return None
    return "a thing name is lower-case words joined by '-', e.g. 'big-box'"
