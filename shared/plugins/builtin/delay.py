"""OS::Heat::Delay: a pause at a point of a stack's operations, without holding a worker.

Where it sits: run by the worker and the observer like any type, touching
nothing outside. An action listed in `actions` (CREATE by default; DELETE,
SUSPEND, RESUME) returns IN_PROGRESS at once with the instant the pause ends
carried in the physical id (`common.with_pending`), so the worker's slot is
free at once; the observer then watches it, told by `retry_after` exactly how
long to wait, and reports it done when that instant has passed. Ordering comes
from the graph: the pause happens after what the Delay depends on and before
what depends on it when creating or suspending, the other way round when
deleting or resuming (as in Heat).

The pause is `min_wait` plus a jitter drawn uniformly from 0 to `max_jitter *
jitter_multiplier` seconds, from the action's idempotency key (a redelivered
job pauses the same), so a scaled unit of a big group can spread its members.
An update changes only the properties (no pause, as in Heat). Limits: the
longest pause is 12 hours (`MAX_WAIT_SECONDS`, as a wait condition's timeout),
and an action whose pause would outlast the stack operation's timeout fails
at once, naming both (Heat refuses it when validating).
"""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator
from pydantic_core import PydanticCustomError

from shared.errors import PermanentError
from shared.plugins.base import (
    ActionContext,
    ActionResult,
    Observation,
    ObservedState,
    Outcome,
    Properties,
    ResourceType,
    prop,
)
from shared.plugins.builtin.common import (
    KeyedRandom,
    Pending,
    as_props,
    physical_name,
    split_pending,
    with_pending,
)

#: The longest pause a Delay may ask for (seconds): a wait condition's longest timeout.
MAX_WAIT_SECONDS = 43200.0

DelayAction = Literal["CREATE", "DELETE", "SUSPEND", "RESUME"]


class DelayProperties(Properties):
    min_wait: float = prop(0, ge=0, description="Seconds to wait during the listed actions.")
    max_jitter: float = prop(
        0, ge=0, description="The most jitter added to min_wait (times jitter_multiplier)."
    )
    jitter_multiplier: float = prop(1.0, ge=0, description="Seconds one unit of max_jitter stands for.")
    actions: list[DelayAction] = prop(["CREATE"], description="The actions during which the delay happens.")

    @model_validator(mode="after")
    def _bounded(self) -> DelayProperties:
        longest = longest_wait(self)
        if longest > MAX_WAIT_SECONDS:
            raise PydanticCustomError(
                "delay_too_long",
                "min_wait + max_jitter * jitter_multiplier is {longest}s, more than the longest "
                "delay ({limit}s)",
                {"longest": f"{longest:g}", "limit": f"{MAX_WAIT_SECONDS:g}"},
            )
        return self


def longest_wait(props: DelayProperties) -> float:
    return props.min_wait + props.max_jitter * props.jitter_multiplier


def wait_seconds(props: DelayProperties, action: str, key: str) -> float:
    """The pause of `action` (0 when it is not listed): min_wait plus a jitter drawn from `key`."""
    if action.upper() not in props.actions:
        return 0.0
    jitter = props.max_jitter * props.jitter_multiplier
    if jitter <= 0:
        return props.min_wait
    fraction = KeyedRandom(key, "delay-jitter").below(1_000_000) / 1_000_000
    return props.min_wait + jitter * fraction


class Delay(ResourceType):
    type_name = "OS::Heat::Delay"
    description = "Pauses for min_wait plus a random jitter during the listed actions."
    properties = DelayProperties
    attributes = {}
    support_version = "11.0.0"

    def _pause(self, ctx: ActionContext, base: str, action: str, props: Properties) -> ActionResult:
        mine = as_props(props, DelayProperties)
        wait = wait_seconds(mine, action, ctx.idempotency_key)
        if wait <= 0:
            return ActionResult(base)
        now = ctx.clock()
        if now + wait > ctx.deadline:
            raise PermanentError(
                f"{self.type_name} delay of {wait:.0f}s exceeds the stack operation's timeout "
                f"({max(0.0, ctx.deadline - now):.0f}s left)"
            )
        return ActionResult(with_pending(base, Pending(action, now + wait)), Outcome.IN_PROGRESS)

    async def create(self, ctx: ActionContext, props: Properties) -> ActionResult:
        return self._pause(ctx, physical_name(ctx), "create", props)

    async def update(
        self, ctx: ActionContext, physical_id: str, old: Properties, new: Properties
    ) -> ActionResult:
        as_props(new, DelayProperties)
        return ActionResult(split_pending(physical_id)[0])

    async def delete(self, ctx: ActionContext, physical_id: str, props: Properties) -> ActionResult:
        return self._pause(ctx, split_pending(physical_id)[0], "delete", props)

    async def suspend(self, ctx: ActionContext, physical_id: str, props: Properties) -> ActionResult:
        return self._pause(ctx, split_pending(physical_id)[0], "suspend", props)

    async def resume(self, ctx: ActionContext, physical_id: str, props: Properties) -> ActionResult:
        return self._pause(ctx, split_pending(physical_id)[0], "resume", props)

    async def observe(self, ctx: ActionContext, physical_id: str, props: Properties) -> Observation:
        base, pending = split_pending(physical_id)
        if pending is None:
            return Observation(ObservedState.READY)
        left = pending.ready_at - ctx.clock()
        if left > 0:
            reason = f"{pending.action} delay: {left:.0f}s left"
            return Observation(ObservedState.IN_PROGRESS, reason=reason, retry_after=left)
        if pending.action == "delete":
            return Observation(ObservedState.GONE)
        return Observation(ObservedState.READY, physical_id=base)
