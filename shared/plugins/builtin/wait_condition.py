"""OS::Heat::WaitConditionHandle, UpdateWaitConditionHandle and WaitCondition: waiting for
signals. (An UpdateWaitConditionHandle is a handle that every stack update replaces.)

Where they sit: a server (or anything) signals the handle by POSTing JSON
to the handle's `endpoint` on Converge's API; the condition completes once
`count` SUCCESS signals have arrived, fails on a FAILURE signal, and fails
when `timeout` seconds pass first.

What this module provides (no engine needed):
- the handle's attributes: `endpoint` (Converge's resource-signal URL built
  from `ctx.api_url`), `token` (per-handle secret drawn from the create's
  idempotency key, stable on redelivery), `curl_cli` (ready-made curl
  prefix, as Heat's) and `signal` (JSON of endpoint and token);
- `normalise_signal`: Heat's signal format check and defaults (status
  SUCCESS/FAILURE, reason, data, id) — the handle's `signal` action runs it;
- `evaluate`: the condition's decision from the signals received so far,
  its timeout and `count`; `data_attribute`: the condition's `data` attribute
  (JSON object of signal id -> data, as Heat's);
- the condition's create (IN_PROGRESS, timeout instant carried in the
  physical id) and an `observe` that reports FAILED once the timeout passed.

What the engine does with them (`services.engine.signals`): it accepts POSTs
to `.../resources/{handle}/signal`, checks `X-Auth-Token` against the
handle's `token` attribute, stores each normalised signal on the handle's
row, then decides every condition waiting on the handle with `evaluate`
(the result carries `data`, built by `data_attribute`). Only the engine sees
the stored signals; `observe` here knows only the timeout, so whichever of
the two outcomes arrives second is stale and ignored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal
from urllib.parse import quote

from shared.errors import InvalidInput, PermanentError
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
    KeyedRandom,
    Pending,
    as_props,
    physical_name,
    split_pending,
    with_pending,
)

STATUS_SUCCESS = "SUCCESS"
STATUS_FAILURE = "FAILURE"


class HandleProperties(Properties):
    signal_transport: Literal["TOKEN_SIGNAL", "HEAT_SIGNAL", "NO_SIGNAL"] = prop(
        "TOKEN_SIGNAL",
        description="How the handle is signalled: TOKEN_SIGNAL (POST with the handle's token), "
        "HEAT_SIGNAL (POST with the caller's API token), NO_SIGNAL (no signal needed).",
        update=UpdateRule.REPLACE,
    )


def signal_endpoint(ctx: ActionContext) -> str:
    """Converge's resource-signal URL for the resource the action is about."""
    if not ctx.api_url:
        raise PermanentError(
            f"{ctx.resource_name}: no API URL to build the signal endpoint from "
            "(the worker's action context has an empty api_url)"
        )
    return (
        f"{ctx.api_url.rstrip('/')}/v1/{quote(ctx.project_id, safe='')}/stacks/"
        f"{quote(ctx.stack_name, safe='')}/{quote(ctx.stack_id, safe='')}/resources/"
        f"{quote(ctx.resource_name, safe='')}/signal"
    )


def curl_cli(endpoint: str, token: str) -> str:
    return (
        f"curl -i -X POST -H 'X-Auth-Token: {token}' -H 'Content-Type: application/json' "
        f"-H 'Accept: application/json' {endpoint}"
    )


class WaitConditionHandle(ResourceType):
    type_name = "OS::Heat::WaitConditionHandle"
    description = "Receives signals (e.g. from a server) for an OS::Heat::WaitCondition."
    properties: ClassVar[type[Properties]] = HandleProperties
    attributes = {
        "token": "Token for signalling the handle when signal_transport is TOKEN_SIGNAL.",
        "endpoint": "URL for signalling the handle (POST JSON).",
        "curl_cli": "curl command prefix signalling the handle; add "
        '--data-binary \'{"status": "SUCCESS"}\' or \'{"status": "FAILURE"}\'.',
        "signal": "JSON map with the endpoint and token a client uses to signal the handle.",
    }
    attribute_types = dict.fromkeys(("token", "endpoint", "curl_cli", "signal"), "String")
    support_version = "2014.2"

    async def create(self, ctx: ActionContext, props: Properties) -> ActionResult:
        mine = as_props(props, HandleProperties)
        if mine.signal_transport == "NO_SIGNAL":
            return ActionResult(physical_name(ctx))
        endpoint = signal_endpoint(ctx)
        token = None
        if mine.signal_transport == "TOKEN_SIGNAL":
            token = KeyedRandom(ctx.idempotency_key, "signal-token").hex(24)
        attributes = {
            "endpoint": endpoint,
            "token": token,
            "curl_cli": curl_cli(endpoint, token) if token else None,
            "signal": json.dumps({"endpoint": endpoint, "token": token}),
        }
        return ActionResult(physical_name(ctx), attributes=attributes)

    async def delete(self, ctx: ActionContext, physical_id: str, props: Properties) -> ActionResult:
        return ActionResult(physical_id)

    async def signal(
        self, ctx: ActionContext, physical_id: str, props: Properties, data: Mapping[str, Any]
    ) -> ActionResult:
        """Check one signal; the normalised form is returned as attribute `signal_received`
        (its `id` is None when the sender gave none: the engine numbers it)."""
        received = normalise_signal(data, number=None)
        return ActionResult(physical_id, attributes={"signal_received": received.as_dict()})


class UpdateWaitConditionHandle(WaitConditionHandle):
    """A handle replaced by every stack update (`replaced_on_update`): a new id, token and
    endpoint, with no signals, so a condition waiting on it (its `handle` changed) is
    replaced too and waits for fresh signals. Signalled as a TOKEN_SIGNAL handle."""

    type_name = "OS::Heat::UpdateWaitConditionHandle"
    description = (
        "A wait condition handle that every stack update replaces (new id, token and endpoint, "
        "signals cleared), so its senders must signal again after each update."
    )
    properties = Properties
    support_version = "2014.1"
    replaced_on_update = True

    async def create(self, ctx: ActionContext, props: Properties) -> ActionResult:
        return await super().create(ctx, HandleProperties())

    async def update(
        self, ctx: ActionContext, physical_id: str, old: Properties, new: Properties
    ) -> ActionResult:
        raise ReplacementNeeded(f"{ctx.resource_name}: {self.type_name} is replaced on every update")

    async def signal(
        self, ctx: ActionContext, physical_id: str, props: Properties, data: Mapping[str, Any]
    ) -> ActionResult:
        return await super().signal(ctx, physical_id, HandleProperties(), data)


@dataclass(frozen=True)
class WaitSignal:
    """One signal as stored: Heat's metadata keys."""

    status: str
    reason: str
    data: Any
    id: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason, "data": self.data, "id": self.id}


def normalise_signal(details: Mapping[str, Any] | None, *, number: int | None) -> WaitSignal:
    """Heat's handle_signal rules: missing fields get defaults, status must be
    SUCCESS or FAILURE. `number` is the signal's 1-based arrival number."""
    body = dict(details or {})
    status = body.get("status", STATUS_SUCCESS)
    if status not in (STATUS_SUCCESS, STATUS_FAILURE):
        raise InvalidInput(
            f"status must be {STATUS_SUCCESS} or {STATUS_FAILURE}, not {status!r}", path="status"
        )
    default_reason = f"Signal {number} received" if number is not None else "Signal received"
    signal_id = body.get("id", number)
    return WaitSignal(
        status=status,
        reason=str(body.get("reason", default_reason)),
        data=body.get("data"),
        id=str(signal_id) if signal_id is not None else None,
    )


def data_attribute(signals: Sequence[WaitSignal]) -> str:
    """The condition's `data` attribute: JSON of signal id -> data (later ids win)."""
    by_id = {s.id if s.id is not None else str(n): s.data for n, s in enumerate(signals, 1)}
    return json.dumps(by_id)


class ConditionProperties(Properties):
    handle: str = prop(
        description="A reference to the wait condition handle used to signal this condition.",
        update=UpdateRule.REPLACE,
    )
    timeout: float = prop(
        description="Seconds to wait for the required number of signals.",
        update=UpdateRule.REPLACE,
        ge=1,
        le=43200,
    )
    count: int = prop(1, description="Number of SUCCESS signals needed before the condition completes.", ge=1)


def evaluate(signals: Sequence[WaitSignal], *, count: int, now: float, timeout_at: float) -> Observation:
    """The condition's state from what has arrived. Pure; the engine calls it."""
    failed = [s for s in signals if s.status != STATUS_SUCCESS]
    if failed:
        reasons = "; ".join(s.reason for s in failed)
        return Observation(ObservedState.FAILED, reason=f"wait condition failure: {reasons}")
    attributes = {"data": data_attribute(signals)}
    if len(signals) >= count:
        return Observation(ObservedState.READY, attributes=attributes)
    if now >= timeout_at:
        return Observation(
            ObservedState.FAILED,
            attributes=attributes,
            reason=f"timed out: {len(signals)} of {count} signals received",
        )
    return Observation(ObservedState.IN_PROGRESS, attributes=attributes)


class WaitCondition(ResourceType):
    type_name = "OS::Heat::WaitCondition"
    description = "Completes when its handle has received `count` SUCCESS signals."
    properties = ConditionProperties
    attributes = {"data": "JSON string of the data sent with the signals, by signal id."}
    attribute_types = {"data": "String"}
    support_version = "2014.2"

    def _waiting(self, ctx: ActionContext, base: str, action: str, timeout: float) -> ActionResult:
        pending = Pending(action, ctx.clock() + timeout, fail=True)
        return ActionResult(with_pending(base, pending), Outcome.IN_PROGRESS)

    async def create(self, ctx: ActionContext, props: Properties) -> ActionResult:
        mine = as_props(props, ConditionProperties)
        return self._waiting(ctx, physical_name(ctx), "create", mine.timeout)

    async def update(
        self, ctx: ActionContext, physical_id: str, old: Properties, new: Properties
    ) -> ActionResult:
        after = as_props(new, ConditionProperties)
        base, _ = split_pending(physical_id)
        return self._waiting(ctx, base, "update", after.timeout)

    async def delete(self, ctx: ActionContext, physical_id: str, props: Properties) -> ActionResult:
        return ActionResult(split_pending(physical_id)[0])

    async def observe(self, ctx: ActionContext, physical_id: str, props: Properties) -> Observation:
        mine = as_props(props, ConditionProperties)
        _, pending = split_pending(physical_id)
        if pending is None:
            return Observation(ObservedState.READY)
        if ctx.clock() >= pending.ready_at:
            return Observation(
                ObservedState.FAILED, reason=f"timed out after {mine.timeout:g}s waiting for signals"
            )
        return Observation(ObservedState.IN_PROGRESS, reason="waiting for signals")
