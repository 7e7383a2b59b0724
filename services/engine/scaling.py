"""A scaling policy's signal: decide the group's size and update its child stack (async shell).

Where it sits: `POST .../resources/{policy}/signal` reaches `signals.Signals`,
which, for an `OS::Heat::ScalingPolicy` (authorised by the policy's own token,
as a wait-condition handle is, or a project token), calls `Scaler.signal` in
its transaction. The policy and its group's rows are locked (in id order, so
concurrent signals take turns; the group's child stack first, as the end of a
resize takes them), `core.scaling.decide_signal` decides, and a
new size is recorded on the group's row (its `ScalingState`) with both
cooldowns, then the group's child stack is updated to it
(`nested.children.Children.rescale`), preempting any update the child was
running. A signal that changes nothing (cooldown, a size at its bound, an
alarm not in "alarm" state) is answered as accepted and recorded as an event
saying why, as Heat's NoActionRequired. When the child's update completes,
the group takes its new attributes (`nested.answer`).

A group whose stack operation is working on it (it has a job) refuses signals
(409: retry); Heat accepts them and scales after. A group whose last resize
failed (UPDATE_FAILED, see `nested.answer`) takes signals and does nothing,
saying why, as Heat's; a stack update repairs it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

import structlog
from pydantic import ValidationError

from services.engine.core.model import ResourceRow, StackId, StackRow, Status
from services.engine.core.nesting import (
    COOLDOWN_ATTRIBUTE,
    SCALING_STATE_OUTPUT,
    SCALING_TYPE,
    scaling_state,
    without_digest,
)
from services.engine.core.row_change import ResourceChange
from services.engine.core.scaling import Cooldown, Group, Policy, decide_signal
from services.engine.effects import Effects
from services.engine.nested.children import Children
from services.engine.store.tx import Tx
from shared.errors import ConflictError, InvalidInput
from shared.plugins.builtin.nested import AutoScalingGroupProperties
from shared.plugins.builtin.scaling_policy import ScalingPolicy, ScalingPolicyProperties

log = structlog.get_logger(__name__)

POLICY_TYPE = ScalingPolicy.type_name


class ScalingRefused(InvalidInput):
    """The policy cannot scale: its group is not one, or its properties are not usable."""


class Scaler:
    def __init__(self, *, children: Children, clock: Callable[[], float] = time.time) -> None:
        self._children = children
        self._clock = clock

    async def signal(
        self, tx: Tx, stack: StackRow, policy: ResourceRow, details: Mapping[str, Any], fx: Effects
    ) -> None:
        """Apply one signal of `policy` (a row of `stack`) to its group."""
        settings = _settings(ScalingPolicyProperties, policy, "OS::Heat::ScalingPolicy")
        group = next(
            (
                r
                for r in await tx.resources(stack.stack_id)
                if r.replaced_by is None
                and r.type == SCALING_TYPE
                and r.physical_id is not None
                and r.physical_id == settings.auto_scaling_group_id
            ),
            None,
        )
        if group is None:
            raise ScalingRefused(
                f"{policy.name}: auto_scaling_group_id {settings.auto_scaling_group_id!r} is not an "
                f"{SCALING_TYPE} of stack {stack.name}"
            )
        await self._lock_child(tx, group)
        locked: dict[int, ResourceRow] = {}
        for rid in sorted({policy.resource_id, group.resource_id}):
            row = await tx.resource(rid, lock=True)
            if row is None:
                raise ConflictError(f"resource {rid} went away while scaling; retry")
            locked[rid] = row
        policy, group = locked[policy.resource_id], locked[group.resource_id]
        if group.current_job is None and group.status is Status.FAILED:
            # Heat's NoActionRequired: a failed group does not scale; a stack update repairs it.
            note = (
                f"The resource {group.name} could not perform scaling action: it is "
                f"{group.action.value}_FAILED ({group.status_reason}); a stack update repairs it"
            )
            log.info("scaling_signal", policy=policy.name, group=group.name, size=None, note=note)
            fx.event(stack.stack_id, policy.name, policy.physical_id, policy.type, "SIGNAL", "COMPLETE", note)
            return
        if group.current_job is not None or group.status is not Status.COMPLETE:
            raise ConflictError(
                f"{group.name} is {group.action.value}_{group.status.value}: it cannot scale until "
                "its stack's operation is done with it; retry"
            )
        sizes = _settings(AutoScalingGroupProperties, group, SCALING_TYPE)
        state = scaling_state(group.attributes)
        if state is None:
            raise ConflictError(f"{group.name} has not been created yet; retry")
        decision = decide_signal(
            Policy(
                policy.name,
                settings.adjustment_type,
                settings.scaling_adjustment,
                settings.min_adjustment_step,
                settings.cooldown,
            ),
            Group(group.name, state.size, sizes.min_size, sizes.max_size, sizes.cooldown),
            dict(details),
            policy_recorded=Cooldown.from_dict(policy.attributes.get(COOLDOWN_ATTRIBUTE)),
            group_recorded=Cooldown.from_dict(state.cooldown),
            now=self._clock(),
        )
        log.info(
            "scaling_signal", policy=policy.name, group=group.name, size=decision.size, note=decision.note
        )
        fx.event(
            stack.stack_id, policy.name, policy.physical_id, policy.type, "SIGNAL", "COMPLETE", decision.note
        )
        if decision.size is None:
            return
        assert decision.policy_cooldown is not None
        assert decision.group_cooldown is not None
        policy_attributes = {**policy.attributes, COOLDOWN_ATTRIBUTE: decision.policy_cooldown.as_dict()}
        if not await tx.update_resource(policy, ResourceChange(attributes=policy_attributes)):
            raise ConflictError(f"{policy.name} changed while scaling; retry")
        decided = replace(state, size=decision.size, cooldown=decision.group_cooldown.as_dict())
        group_attributes = {**group.attributes, SCALING_STATE_OUTPUT: decided.as_dict()}
        if not await tx.update_resource(group, ResourceChange(attributes=group_attributes)):
            raise ConflictError(f"{group.name} changed while scaling; retry")
        updated = await tx.resource(group.resource_id)
        assert updated is not None
        await self._children.rescale(tx, stack, updated, fx)

    @staticmethod
    async def _lock_child(tx: Tx, group: ResourceRow) -> None:
        """Lock the group's child stack (its rows, then the stack) before the group's row:
        the order in which the end of a resize takes them (a member's result, the child's
        end, then the group's new attributes). The other order deadlocked with it."""
        try:
            child = StackId(uuid.UUID(str(group.physical_id)))
        except ValueError:
            return  # not a child stack's id: rescale says so
        await tx.lock_resources(child)
        await tx.stack(child, lock=True)


S = TypeVar("S", ScalingPolicyProperties, AutoScalingGroupProperties)


def _settings(schema: type[S], row: ResourceRow, type_name: str) -> S:
    try:
        return schema.model_validate(without_digest(row.properties or {}))
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "properties"
        raise ScalingRefused(f"{row.name} ({type_name}) property {where}: {err['msg']}") from None
