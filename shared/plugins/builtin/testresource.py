"""OS::Heat::TestResource: Heat's knob-driven type for exercising the engine.

Where it sits: run by the worker (create/update/delete) and the observer
(observe) like any type; it touches nothing outside. Knobs, as in Heat:

- `value` is stored and exposed as attribute `output`;
- `fail: true` fails create/update with a `PermanentError` (after the wait,
  if there is one); delete ignores it;
- `update_replace: true` forces replacement when `value` changes or when
  the knob itself is switched on; a changed `update_replace_value` always
  replaces;
- `wait_secs` / `action_wait_secs.{create,update,delete}` (-1 = forever): the
  action returns IN_PROGRESS and `observe` reports READY (delete: GONE; with
  `fail`: FAILED) once the time has passed. The instant is carried in the
  physical id (`base~action~ready_at~ok|fail`) because `observe` may run in
  another process and receives only the physical id; once the action is over
  `observe` gives the base id back (`Observation.physical_id`), so the id an
  in-place update ends with is the one it started with, as in Heat;
- `attr_wait_secs`: `observe` waits this long before reporting attributes,
  giving up at once if the action is cancelled;
- `constraint_prop_secs`, `client_name`, `entity_name` are accepted for
  template compatibility and have no effect (Converge has no custom
  constraints or client polling).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from shared.errors import PermanentError
from shared.plugins.base import (
    ActionContext,
    ActionResult,
    Observation,
    ObservedState,
    Outcome,
    Properties,
    ReplacementNeeded,
    ResourceType,
    UpdateRule,
    prop,
)
from shared.plugins.builtin.common import (
    Pending,
    as_props,
    check_cancelled,
    pause,
    physical_name,
    split_pending,
    with_pending,
)


class ActionWaitSecs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    create: float | None = prop(None, description="Seconds to wait after a create.")
    update: float | None = prop(None, description="Seconds to wait after an update.")
    delete: float | None = prop(None, description="Seconds to wait after a delete.")


class TestResourceProperties(Properties):
    value: str = prop("test_string", description="The input string to be stored.")
    fail: bool = prop(False, description="Fail the resource operation (tests failure paths).")
    update_replace: bool = prop(False, description="Replace the resource instead of updating it in place.")
    update_replace_value: str | None = prop(
        None,
        description="Some value that can be stored but can not be updated.",
        update=UpdateRule.REPLACE,
    )
    wait_secs: float = prop(0, description="Seconds to wait after an action (-1 is infinite).")
    action_wait_secs: ActionWaitSecs | None = prop(
        None, description="Per-action wait seconds; defaults to wait_secs."
    )
    attr_wait_secs: float = prop(0, description="Seconds to wait before reporting attributes.")
    constraint_prop_secs: float = prop(0, description="Accepted for compatibility; no effect.")
    client_name: str = prop("", description="Accepted for compatibility; no effect.")
    entity_name: str = prop("", description="Accepted for compatibility; no effect.")


def wait_seconds(props: TestResourceProperties, action: str) -> float:
    """The wait configured for `action`: its own entry, else `wait_secs`."""
    if props.action_wait_secs is not None:
        specific: float | None = getattr(props.action_wait_secs, action)
        if specific is not None:
            return specific
    return props.wait_secs


def ready_at(now: float, seconds: float) -> float:
    return float("inf") if seconds < 0 else now + seconds


class TestResource(ResourceType):
    __test__ = False  # not a pytest test class, despite the name

    type_name = "OS::Heat::TestResource"
    description = "Stores the string it is given; knobs simulate waits, failures, replacement."
    properties = TestResourceProperties
    attributes = {"output": "The string that was stored. Also available by referencing the resource."}
    attribute_types = {"output": "String"}
    support_version = "5.0.0"

    def _finish(
        self, ctx: ActionContext, base: str, action: str, props: TestResourceProperties, wait: float
    ) -> ActionResult:
        if wait == 0:
            if props.fail and action != "delete":
                raise PermanentError(f"Test Resource failed {ctx.resource_name}")
            return ActionResult(base, attributes={"output": props.value})
        pending = Pending(action, ready_at(ctx.clock(), wait), props.fail and action != "delete")
        return ActionResult(with_pending(base, pending), Outcome.IN_PROGRESS)

    async def create(self, ctx: ActionContext, props: Properties) -> ActionResult:
        check_cancelled(ctx)
        mine = as_props(props, TestResourceProperties)
        return self._finish(ctx, physical_name(ctx), "create", mine, wait_seconds(mine, "create"))

    async def update(
        self, ctx: ActionContext, physical_id: str, old: Properties, new: Properties
    ) -> ActionResult:
        check_cancelled(ctx)
        before = as_props(old, TestResourceProperties)
        after = as_props(new, TestResourceProperties)
        value_changed = after.value != before.value
        if after.update_replace and (value_changed or not before.update_replace):
            raise ReplacementNeeded(f"{ctx.resource_name}: update_replace is set")
        if after.update_replace_value != before.update_replace_value:
            raise ReplacementNeeded(f"{ctx.resource_name}: update_replace_value changed")
        base, _ = split_pending(physical_id)
        wait = wait_seconds(after, "update") if value_changed else 0
        return self._finish(ctx, base, "update", after, wait)

    async def delete(self, ctx: ActionContext, physical_id: str, props: Properties) -> ActionResult:
        check_cancelled(ctx)
        mine = as_props(props, TestResourceProperties)
        base, _ = split_pending(physical_id)
        return self._finish(ctx, base, "delete", mine, wait_seconds(mine, "delete"))

    async def observe(self, ctx: ActionContext, physical_id: str, props: Properties) -> Observation:
        mine = as_props(props, TestResourceProperties)
        _, pending = split_pending(physical_id)
        if pending is not None and ctx.clock() < pending.ready_at:
            return Observation(
                ObservedState.IN_PROGRESS,
                reason=f"{pending.action} waiting",
                retry_after=pending.ready_at - ctx.clock(),
            )
        if pending is not None and pending.action == "delete":
            return Observation(ObservedState.GONE)
        if pending is not None and pending.fail:
            return Observation(ObservedState.FAILED, reason=f"Test Resource failed {ctx.resource_name}")
        await pause(ctx, mine.attr_wait_secs)
        base = None if pending is None else split_pending(physical_id)[0]
        return Observation(ObservedState.READY, attributes={"output": mine.value}, physical_id=base)
