"""Mark unhealthy (Heat's `PATCH .../resources/{name}`): a user's verdict on one resource.

Where it sits: the API's resource PATCH calls `mark_unhealthy`. The change is
made like every convergence change, in one transaction: the row is written
by compare-and-swap on its version (a check that changed it meanwhile wins,
and the caller is told to retry), and the change is recorded as an event. A
resource with an action in flight (IN_PROGRESS, or a job out) is refused with
Heat's ActionInProgress (409), as Heat refuses while the resource is locked.

Heat's rules: unhealthy -> CHECK_FAILED, unless the resource is being
deleted; healthy again -> CHECK_COMPLETE, only from CHECK_FAILED; anything
else changes nothing. A resource marked CHECK_FAILED is replaced by the
stack's next update, as any failed resource is.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.engine.core.model import Action, ResourceRow, StackId, Status
from services.engine.core.row_change import ResourceChange
from services.engine.effects import Effects
from services.engine.store import Store
from shared.errors import ConflictError, NotFound

#: Heat's reason when the request gives none.
DEFAULT_REASON = "state changed by resource_mark_unhealthy api"


class ActionInProgress(ConflictError):
    """The resource has an action in flight; Heat's name and message for it."""


@dataclass(frozen=True)
class Verdict:
    """What marking changes on the row: (action, status) and the reason; None = nothing."""

    action: Action
    status: Status
    reason: str


def verdict(row: ResourceRow, *, unhealthy: bool, reason: str) -> Verdict | None:
    """Heat's rules for the mark; pure."""
    reason = reason or DEFAULT_REASON
    if unhealthy:
        return None if row.action is Action.DELETE else Verdict(Action.CHECK, Status.FAILED, reason)
    if (row.action, row.status) == (Action.CHECK, Status.FAILED):
        return Verdict(Action.CHECK, Status.COMPLETE, reason)
    return None


async def mark_unhealthy(store: Store, stack_id: StackId, name: str, *, unhealthy: bool, reason: str) -> None:
    fx = Effects()
    async with store.transaction() as tx:
        stack = await tx.stack(stack_id)
        row = (await tx.current_resources(stack_id, [name])).get(name)
        if stack is None or row is None:
            raise NotFound(f"The Resource ({name}) could not be found.")
        if row.status is Status.IN_PROGRESS or row.current_job is not None:
            raise ActionInProgress(
                f"Stack {stack.name} already has an action ({stack.action.value}) in progress: "
                f"resource {name} is {row.action.value}_{row.status.value}."
            )
        change = verdict(row, unhealthy=unhealthy, reason=reason)
        if change is None:
            return
        marked = ResourceChange(action=change.action, status=change.status, status_reason=change.reason)
        if not await tx.update_resource(row, marked):
            raise ConflictError(f"resource {name} changed while being marked; retry")
        fx.event(
            stack_id, name, row.physical_id, row.type, change.action.value, change.status.value, change.reason
        )
        await fx.commit(tx)
