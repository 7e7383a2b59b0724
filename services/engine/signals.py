"""Signals to resources: wait-condition handles and the conditions they complete.

Where it sits: `POST .../resources/{name}/signal` (API) calls `Signals.signal`.
For an `OS::Heat::WaitConditionHandle` (or `UpdateWaitConditionHandle`, which
every stack update replaces, signals and all) the normalised signal is appended to
the handle's row, and every `OS::Heat::WaitCondition` waiting on that handle
is evaluated with the plugin's pure `evaluate`; a decided condition gets a
`JobResult` through the outbox, so the ordinary result path records it and
propagates. The same evaluation runs when a condition starts waiting
(`condition_result`), for signals that arrived first. The condition's
timeout is enforced by the observer watching it; whichever outcome arrives
second is stale and ignored.

Limits (what a handle's token holder, possibly a compromised server, can
cost): the API refuses a body over `ApiLimits.signal_bytes` (413) before
reading it; a handle keeps at most `per_handle` signals; a reason is cut to
`reason_chars` before it is stored or shown; and once no condition waits on
the handle and the stack's operation is over (every condition it serves has
completed or failed), further signals are refused (409, `SignalsClosed`).
Heat keeps accepting them, growing the handle's metadata without bound.

A signal to an `OS::Heat::ScalingPolicy` (its own token, or a project token)
scales its group (`services.engine.scaling`).

A signal to an `OS::Heat::SoftwareDeployment` or StructuredDeployment (a project
token, or the agent token of the server it deploys to) carries the agent's
outputs and completes the deployment (`services.engine.deployments`), in any
action (as Heat's deployments, which a DELETE or SUSPEND delivered to the
server waits for). A PUT to a deployment's signal URL (TEMP_URL_SIGNAL,
`services.engine.deployment_urls`), authorised by the token in the URL, does
the same (`put_signal_object`).

A signal `{"unset_hook": "<hook>"}` to any resource clears the hook its check
is paused at (`services.engine.gates`); it needs a project token.
"""

from __future__ import annotations

import hmac
import math
import uuid
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from services.engine.core.model import Action, ResourceRow, StackId, StackRow, Status
from services.engine.core.row_change import ResourceChange
from services.engine.core.sources import WALL_CLOCK, Clock
from services.engine.deployment_urls import token_ok
from services.engine.deployments import (
    agent_may,
    declared_outputs,
    signal_resource,
    signalled,
    update_deployment,
)
from services.engine.effects import Effects
from services.engine.gates import Gates
from services.engine.outbox import Outbox
from services.engine.scaling import POLICY_TYPE, Scaler
from services.engine.store import Store
from services.engine.store.software_records import DeploymentChange, DeploymentRecord
from services.engine.store.tx import Tx
from shared.errors import ConflictError, InvalidInput, NotFound, PermanentError
from shared.plugins.base import ObservedState
from shared.plugins.builtin.common import split_pending
from shared.plugins.builtin.software_deployment import DEPLOYMENT_TYPES, signal_outcome
from shared.plugins.builtin.wait_condition import WaitSignal, evaluate, normalise_signal
from shared.protocol import ENGINE_QUEUE, JobAction, JobOutcome, JobResult

HANDLE = "OS::Heat::WaitConditionHandle"
UPDATE_HANDLE = "OS::Heat::UpdateWaitConditionHandle"
HANDLE_TYPES = frozenset({HANDLE, UPDATE_HANDLE})
CONDITION = "OS::Heat::WaitCondition"
#: Operations during which a condition may still start waiting on a handle.
WAITING_ACTIONS = frozenset({Action.CREATE, Action.UPDATE, Action.ROLLBACK, Action.ADOPT})
#: Heat refuses signals to a resource being deleted or suspended.
NO_SIGNAL_ACTIONS = frozenset({Action.DELETE, Action.SUSPEND})


class SignalRefused(InvalidInput):
    """The resource does not take signals, or the signal is malformed."""


class SignalsClosed(ConflictError):
    """Every wait condition served by the handle has completed: nothing would read a signal."""


def cut(text: str, limit: int) -> str:
    """`text`, cut to `limit` characters (ending "...") when longer."""
    return text if len(text) <= limit else text[: max(0, limit - 3)] + "..."


def signals_closed(stack: StackRow, waiting: list[ResourceRow]) -> bool:
    """No condition waits on the handle and none can start to: the stack's operation is
    over (or is one in which no condition starts, e.g. CHECK)."""
    if waiting:
        return False
    return not (stack.status is Status.IN_PROGRESS and stack.action in WAITING_ACTIONS)


class Unauthorized(PermanentError):
    """The signal's token is not the handle's (nor a project token)."""


def stored_signals(handle: ResourceRow) -> list[WaitSignal]:
    raw = handle.attributes.get("signals") or []
    return [WaitSignal(s["status"], s["reason"], s.get("data"), s.get("id")) for s in raw]


def condition_result(condition: ResourceRow, handle: ResourceRow, *, now: float) -> JobResult | None:
    """The waiting condition's outcome from the handle's signals, or None while undecided."""
    if condition.current_job is None or condition.physical_id is None:
        return None
    props = condition.job_properties or {}
    base, pending = split_pending(condition.physical_id)
    observation = evaluate(
        stored_signals(handle),
        count=int(props.get("count", 1)),
        now=now,
        timeout_at=pending.ready_at if pending is not None else math.inf,
    )
    if observation.state is ObservedState.IN_PROGRESS:
        return None
    if observation.state is ObservedState.FAILED and now >= (pending.ready_at if pending else math.inf):
        return None  # a timeout is the observer's to report
    ok = observation.state is ObservedState.READY
    action = JobAction.UPDATE if condition.action.value == "UPDATE" else JobAction.CREATE
    return JobResult(
        id=f"{condition.current_job}:signalled",
        job_id=condition.current_job,
        stack_id=str(condition.stack_id),
        traversal_id=str(condition.traversal_id),
        resource_id=condition.resource_id,
        resource_name=condition.name,
        action=action,
        outcome=JobOutcome.COMPLETE if ok else JobOutcome.FAILED,
        physical_id=base if ok else condition.physical_id,
        attributes=dict(observation.attributes),
        reason="" if ok else f"Resource {action.value.upper()} failed: {observation.reason}",
    )


async def settle_waiting_conditions(
    tx: Tx, stack_id: StackId, handle: ResourceRow, fx: Effects, *, now: float
) -> None:
    """Queue the outcome of every condition waiting on `handle` that its signals decide (at `now`)."""
    if handle.physical_id is None:
        return
    for condition in await tx.waiting_conditions(stack_id, CONDITION, handle.physical_id):
        result = condition_result(condition, handle, now=now)
        if result is not None:
            fx.emit(ENGINE_QUEUE, result)


async def deployment_agent_ok(tx: Tx, project_id: str, row: ResourceRow, token: str) -> bool:
    """Whether `token` is the agent token of the server a deployment resource deploys to."""
    if row.type not in DEPLOYMENT_TYPES:
        return False
    server = (row.job_properties or row.properties or {}).get("server")
    return isinstance(server, str) and await agent_may(tx, project_id, server, token)


def handle_token_ok(handle: ResourceRow, token: str) -> bool:
    """Whether `token` is the handle's (or scaling policy's) own (compared in constant time)."""
    expected = handle.attributes.get("token") if handle.type in (*HANDLE_TYPES, POLICY_TYPE) else None
    return isinstance(expected, str) and hmac.compare_digest(expected.encode(), token.encode())


class Signals:
    def __init__(
        self,
        *,
        store: Store,
        outbox: Outbox,
        per_handle: int = 100,
        reason_chars: int = 255,
        gates: Gates | None = None,
        scaler: Scaler | None = None,
        clock: Clock = WALL_CLOCK,
    ) -> None:
        self._clock = clock  # when a wait condition's signals arrived (seconds since the epoch)
        self._scaler = scaler
        self._store = store
        self._outbox = outbox
        self._per_handle = per_handle
        self._reason_chars = reason_chars
        self._gates = gates

    async def authorizes(self, stack_id: StackId, name: str, token: str) -> bool:
        """Whether `token` is the own token of the handle `name` (a read; `signal` checks
        again), so a caller without a project token is answered before its body is read."""
        async with self._store.transaction() as tx:
            handle = (await tx.current_resources(stack_id, [name])).get(name)
            if handle is not None and handle.type in DEPLOYMENT_TYPES:
                stack = await tx.stack(stack_id)
                return stack is not None and await deployment_agent_ok(tx, stack.project_id, handle, token)
        return handle is not None and handle_token_ok(handle, token)

    async def signal(
        self, stack_id: StackId, name: str, data: Mapping[str, Any], *, token: str, project_token_ok: bool
    ) -> None:
        fx = Effects()
        async with self._store.transaction() as tx:
            rows = await tx.current_resources(stack_id, [name])
            handle = rows.get(name)
            if handle is None and not project_token_ok:  # the same answer as a wrong token
                raise Unauthorized("the signal's X-Auth-Token is not this handle's token")
            if handle is None:
                raise NotFound(f"The Resource ({name}) could not be found.")
            stack = await tx.stack(stack_id)
            assert stack is not None  # the row is the stack's
            if not (
                project_token_ok
                or handle_token_ok(handle, token)
                or await deployment_agent_ok(tx, stack.project_id, handle, token)
            ):
                raise Unauthorized("the signal's X-Auth-Token is not this handle's token")
            if "unset_hook" in data and self._gates is not None:
                if not project_token_ok:  # a handle's token signals its handle, nothing more
                    raise Unauthorized("clearing a hook needs a project token")
                stack = await tx.stack(stack_id)
                assert stack is not None  # the row is the stack's
                await self._gates.clear_hook(tx, stack, handle, data["unset_hook"], fx)
                ids = await fx.commit(tx)
            elif handle.type in DEPLOYMENT_TYPES:  # in any action: a DELETE or SUSPEND may wait for it
                await signal_resource(tx, handle, stack.project_id, data, fx)
                ids = await fx.commit(tx)
            elif handle.type == POLICY_TYPE and self._scaler is not None:
                stack = await tx.stack(stack_id)
                assert stack is not None  # the row is the stack's
                if handle.action in NO_SIGNAL_ACTIONS or handle.physical_id is None:
                    raise SignalRefused(f"Signal resource during {handle.action.value} is not supported.")
                await self._scaler.signal(tx, stack, handle, data, fx)
                ids = await fx.commit(tx)
            else:
                ids = await self._signal_handle(tx, stack_id, name, handle, data, fx)
        await self._outbox.publish(ids, fx.messages)

    async def _signal_handle(
        self, tx: Tx, stack_id: StackId, name: str, handle: ResourceRow, data: Mapping[str, Any], fx: Effects
    ) -> list[int]:
        """Append the signal to a wait-condition handle; settle the conditions it decides."""
        if handle.type not in HANDLE_TYPES:
            raise SignalRefused(
                f"Signal resource during {handle.action.value}: {handle.type} does not accept signals"
            )
        if handle.action in NO_SIGNAL_ACTIONS:
            raise SignalRefused(f"Signal resource during {handle.action.value} is not supported.")
        stack = await tx.stack(stack_id)
        assert stack is not None  # the handle's row is the stack's
        waiting = (
            await tx.waiting_conditions(stack_id, CONDITION, handle.physical_id)
            if handle.physical_id is not None
            else []
        )
        if signals_closed(stack, waiting):
            raise SignalsClosed(
                f"{name} accepts no more signals: no wait condition is waiting for it "
                f"(stack {stack.name} is {stack.action.value}_{stack.status.value})"
            )
        signals = list(handle.attributes.get("signals") or [])
        if len(signals) >= self._per_handle:
            raise SignalRefused(
                f"{name} has received the maximum of {self._per_handle} signals "
                "(CONVERGE_MAX_SIGNALS_PER_HANDLE)"
            )
        received = normalise_signal(data, number=len(signals) + 1)
        received = replace(received, reason=cut(received.reason, self._reason_chars))
        attributes = {**handle.attributes, "signals": [*signals, received.as_dict()]}
        if not await tx.update_resource(handle, ResourceChange(attributes=attributes)):
            raise ConflictError(f"{name} changed while signalling; retry")
        fx.event(stack_id, name, handle.physical_id, handle.type, "SIGNAL", "COMPLETE", received.reason)
        updated = await tx.resource(handle.resource_id)
        assert updated is not None
        await settle_waiting_conditions(tx, stack_id, updated, fx, now=self._clock())
        return await fx.commit(tx)

    async def agent_may(self, project_id: str, server_id: str, token: str) -> bool:
        """Whether `token` is the agent token of the server (its deployment metadata)."""
        async with self._store.transaction() as tx:
            return await agent_may(tx, project_id, server_id, token)

    async def put_deployment(
        self,
        project_id: str,
        deployment_id: uuid.UUID,
        change: DeploymentChange,
        *,
        token: str,
        project_token_ok: bool,
    ) -> DeploymentRecord:
        """`PUT /software_deployments/{id}`: with a project token any change; with the agent
        token of the deployment's server, its outcome (`deployments.update_deployment`)."""
        fx = Effects()
        async with self._store.transaction() as tx:
            record = await tx.software_deployment(project_id, deployment_id)
            if not project_token_ok and (
                record is None or not await agent_may(tx, project_id, record.server_id, token)
            ):
                raise Unauthorized("the X-Auth-Token is not the agent token of the deployment's server")
            if record is None:
                raise NotFound(f"Software deployment with id {deployment_id} not found")
            record = await update_deployment(tx, project_id, deployment_id, change, fx)
            ids = await fx.commit(tx)
        await self._outbox.publish(ids, fx.messages)
        return record

    async def put_signal_object(
        self, project_id: str, deployment_id: uuid.UUID, token: str, details: Any
    ) -> DeploymentRecord:
        """A PUT to a deployment's signal URL (TEMP_URL_SIGNAL): when `token` is the one its
        current run was given, the body is that run's outputs (Heat's signal rules),
        recorded and sent to the job waiting for them (`deployments.signalled`; a
        deployment not in progress keeps its state). Any other token: `Unauthorized`."""
        fx = Effects()
        async with self._store.transaction() as tx:
            record = await tx.software_deployment(project_id, deployment_id, lock=True)
            config = await tx.software_config(project_id, record.config_id) if record is not None else None
            if record is None or not token_ok(config.config if config is not None else None, token):
                raise Unauthorized("the signal URL's token is not the deployment's")
            outcome = signal_outcome(details, await declared_outputs(tx, record))
            record = await signalled(tx, record, outcome, fx)
            ids = await fx.commit(tx)
        await self._outbox.publish(ids, fx.messages)
        return record
