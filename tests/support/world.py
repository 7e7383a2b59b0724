"""A pretend cloud for convergence scenarios, and the resource type that drives it.

`World` records which real resources exist and with what properties: the
ground truth scenarios compare with the template. `thing_type(world)` makes
a resource type `Test::Thing` bound to one world:
- `value` (string): updated in place; `size` (integer): forces replacement;
- `ref` (any): lets templates pass get_resource/get_attr results along;
- `fail` (boolean): the action fails permanently;
`World.refusing`, while set, fails every create (the cloud out of capacity).
A thing deleted while a live one's properties still name it is recorded in
`World.deleted_in_use` (a real cloud would refuse: a port in use, a volume attached).
Creation is idempotent on the job's idempotency key, as real APIs are. It takes
snapshots (its real properties, recorded in `World.snapshots`) and is made
again from one with the snapshot's `value`.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

from shared.errors import PermanentError
from shared.plugins import (
    ActionContext,
    ActionResult,
    Observation,
    ObservedState,
    Properties,
    ResourceType,
    UpdateRule,
    prop,
)


@dataclass
class Real:
    physical_id: str
    name: str
    properties: dict[str, Any]


@dataclass
class World:
    live: dict[str, Real] = field(default_factory=dict)
    by_key: dict[str, str] = field(default_factory=dict)
    created: int = 0
    deleted: int = 0
    suspended: set[str] = field(default_factory=set)
    broken: set[str] = field(default_factory=set)  # physical ids observed in an error state
    refusing: str | None = None  # while set, every create fails with this reason
    observed: int = 0  # calls of `observe`
    looks: Counter[str] = field(default_factory=Counter)  # calls of `observe`, by physical id
    # (action, resource name) of every suspend and resume, in the order they ran
    pauses: list[tuple[str, str]] = field(default_factory=list)
    # (resource name, properties) of every snapshot taken, in the order they were taken
    snapshots: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    # (deleted, user): a thing deleted while a live thing's properties named it
    deleted_in_use: list[tuple[str, str]] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def users_of(self, physical_id: str) -> list[str]:
        """The live things whose properties name `physical_id`."""
        return [r.physical_id for r in self.live.values() if _names(r.properties, physical_id)]

    def by_name(self) -> dict[str, list[Real]]:
        out: dict[str, list[Real]] = {}
        for real in self.live.values():
            out.setdefault(real.name, []).append(real)
        return out


class ThingProperties(Properties):
    value: str | None = prop(None, description="Updated in place.")
    size: int | None = prop(None, description="A change forces replacement.", update=UpdateRule.REPLACE)
    ref: Any = prop(None, description="Any value, to pass references along.")
    fail: bool = prop(False, description="Fail the action.")


def _names(value: Any, physical_id: str) -> bool:
    if isinstance(value, dict):
        return any(_names(v, physical_id) for v in value.values())
    if isinstance(value, list):
        return any(_names(v, physical_id) for v in value)
    return cast(bool, value == physical_id)


def _attributes(real: Real) -> dict[str, Any]:
    return {
        "value": real.properties.get("value"),
        "size": real.properties.get("size"),
        "id": real.physical_id,
    }


def thing_type(world: World) -> type[ResourceType]:
    class Thing(ResourceType):
        type_name = "Test::Thing"
        properties = ThingProperties
        attributes: ClassVar[Mapping[str, str]] = {
            "value": "The value.",
            "size": "The size.",
            "id": "The id.",
        }

        async def create(self, ctx: ActionContext, props: Properties) -> ActionResult:
            assert isinstance(props, ThingProperties)
            if props.fail:
                raise PermanentError(f"{ctx.resource_name} was told to fail")
            if world.refusing is not None:
                raise PermanentError(f"{ctx.resource_name}: {world.refusing}")
            existing = world.by_key.get(ctx.idempotency_key)
            if existing is not None and existing in world.live:
                return ActionResult(existing, attributes=_attributes(world.live[existing]))
            physical_id = f"thing-{next(world._ids)}"
            world.by_key[ctx.idempotency_key] = physical_id
            real = Real(physical_id, ctx.resource_name, props.model_dump(exclude_defaults=True))
            world.live[physical_id] = real
            world.created += 1
            return ActionResult(physical_id, attributes=_attributes(real))

        async def update(
            self, ctx: ActionContext, physical_id: str, old: Properties, new: Properties
        ) -> ActionResult:
            assert isinstance(new, ThingProperties)
            if new.fail:
                raise PermanentError(f"{ctx.resource_name} was told to fail")
            real = world.live.get(physical_id)
            if real is None:
                raise PermanentError(f"{physical_id} does not exist")
            real.properties = new.model_dump(exclude_defaults=True)
            return ActionResult(physical_id, attributes=_attributes(real))

        async def delete(self, ctx: ActionContext, physical_id: str, props: Properties) -> ActionResult:
            if physical_id in world.live:
                world.deleted_in_use.extend((physical_id, u) for u in world.users_of(physical_id))
            if world.live.pop(physical_id, None) is not None:
                world.deleted += 1
            return ActionResult(physical_id)

        async def observe(self, ctx: ActionContext, physical_id: str, props: Properties) -> Observation:
            world.observed += 1
            world.looks[physical_id] += 1
            real = world.live.get(physical_id)
            if real is None:
                return Observation(ObservedState.GONE)
            if physical_id in world.broken:
                return Observation(ObservedState.FAILED, reason=f"{physical_id} is broken")
            return Observation(ObservedState.READY, _attributes(real), dict(real.properties))

        supports_snapshot = True

        async def snapshot(
            self, ctx: ActionContext, physical_id: str, props: Properties
        ) -> Mapping[str, Any]:
            real = world.live.get(physical_id)
            if real is None:
                raise PermanentError(f"{physical_id} does not exist")
            world.snapshots.append((ctx.resource_name, dict(real.properties)))
            return {"properties": dict(real.properties)}

        @classmethod
        def restore_properties(
            cls, properties: Mapping[str, Any], data: Mapping[str, Any]
        ) -> Mapping[str, Any]:
            kept = data.get("properties") or {}
            return {**properties, "value": kept["value"]} if "value" in kept else properties

        async def suspend(self, ctx: ActionContext, physical_id: str, props: Properties) -> ActionResult:
            return self._pause("suspend", ctx, physical_id, world.suspended.add)

        async def resume(self, ctx: ActionContext, physical_id: str, props: Properties) -> ActionResult:
            return self._pause("resume", ctx, physical_id, world.suspended.discard)

        def _pause(
            self, action: str, ctx: ActionContext, physical_id: str, change: Callable[[str], None]
        ) -> ActionResult:
            if physical_id not in world.live:
                raise PermanentError(f"{physical_id} does not exist")
            change(physical_id)
            world.pauses.append((action, ctx.resource_name))
            return ActionResult(physical_id, attributes=_attributes(world.live[physical_id]))

    return Thing
