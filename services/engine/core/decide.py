"""What checking a node does, and what a job's outcome means. Pure.

Forward node of a resource: compare the goal (resolved properties, type)
with the row (last applied properties, status) and decide create, update in
place, replace (a new row, created first), adopt an external id, or nothing.
Cleanup node of a row: keep it when the current goal adopted it, otherwise
delete the real resource (or just forget the row when there is nothing real
behind it or its deletion policy retains it). A row adopted through
`external_id` is never deleted: it is let go of (Heat: "not managed by Heat
... won't be deleted by heat when stack is deleted"). A failed action leaves
the row the properties its delete needs (`properties_after_failure`); a stack
check that found failures ends with `check_failure_reason`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from services.engine.core.model import Action, ResourceRow, Status, TemplateId
from services.engine.core.nesting import GOAL_KEY, without_digest
from services.engine.template import diff_properties
from shared.plugins import Properties


class Forward(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    REPLACE = "replace"
    ADOPT = "adopt"
    NOTHING = "nothing"


@dataclass(frozen=True)
class ForwardDecision:
    kind: Forward
    why: str = ""


def decide_forward(
    row: ResourceRow,
    *,
    type_name: str,
    schema: type[Properties] | None,
    properties: Mapping[str, Any],
    external_id: str | None,
    nested: bool = False,
    replaced_on_update: bool = False,
    goal_template_id: TemplateId | None = None,
) -> ForwardDecision:
    """`schema` None: a template resource (every property applies in place);
    `nested`: the resource is a child stack (see `_decide_nested`);
    `replaced_on_update`: the type is replaced by every operation that brings a new
    template (`goal_template_id`, None for one not stored yet) to a row made or last
    checked under another, whatever changed; a check of the same operation
    delivered again leaves the replacement alone."""
    if not row.exists:
        if external_id is not None:
            return ForwardDecision(Forward.ADOPT, f"adopting external id {external_id}")
        return ForwardDecision(Forward.CREATE)
    if row.action is Action.ADOPT and row.properties is None:
        return ForwardDecision(Forward.ADOPT, f"adopting {row.physical_id}")
    if row.type != type_name:
        return ForwardDecision(Forward.REPLACE, f"type changed from {row.type} to {type_name}")
    if replaced_on_update and row.template_id != goal_template_id:
        return ForwardDecision(Forward.REPLACE, f"{type_name} is replaced on every update")
    if nested:
        return _decide_nested(row, schema, properties)
    if row.status is Status.FAILED and row.action in (Action.CREATE, Action.INIT):
        return ForwardDecision(Forward.REPLACE, "the resource failed to create")
    if row.status is Status.FAILED and row.action is Action.CHECK:
        return ForwardDecision(Forward.REPLACE, f"the resource failed its check: {row.status_reason}")
    diff = diff_properties(schema, row.properties or {}, properties)
    if diff.replace:
        changed = ", ".join(sorted(diff.changed))
        return ForwardDecision(Forward.REPLACE, f"a change of {changed} forces replacement")
    if diff.unchanged and row.status is Status.COMPLETE:
        return ForwardDecision(Forward.NOTHING)
    return ForwardDecision(Forward.UPDATE)


def _decide_nested(
    row: ResourceRow, schema: type[Properties] | None, properties: Mapping[str, Any]
) -> ForwardDecision:
    """A child stack is updated, never replaced, when its goal changed: its own
    resources decide what that changes. A failed or unfinished child is updated
    too (its failed resources are then replaced or updated inside it); an
    unchanged, complete child is left alone."""
    old = row.properties or {}
    if old.get(GOAL_KEY) != properties.get(GOAL_KEY):
        return ForwardDecision(Forward.UPDATE, "the nested templates, files or environment changed")
    diff = diff_properties(schema, without_digest(old), without_digest(properties))
    if not diff.unchanged:
        return ForwardDecision(Forward.UPDATE, f"{', '.join(sorted(diff.changed))} changed")
    if row.status is not Status.COMPLETE:
        return ForwardDecision(Forward.UPDATE, f"the nested stack is {row.action.value}_{row.status.value}")
    return ForwardDecision(Forward.NOTHING)


#: The restricted action (`restricted_actions` in the environment) each decision takes.
_RESTRICTABLE = {Forward.UPDATE: "update", Forward.REPLACE: "replace"}


def restricted_action(decision: Forward, restricted: Collection[str]) -> str | None:
    """The action `decision` would take that the environment restricts, or None. As
    Heat: a resource restricted from `update` may still be replaced when its change
    needs a replacement, and one restricted from `replace` may be updated in place."""
    action = _RESTRICTABLE.get(decision)
    return action if action is not None and action in restricted else None


def restricted_reason(action: str) -> str:
    """Heat's `ResourceActionRestricted` message (the resource's event says it)."""
    return f"{action} is restricted for resource."


def restricted_failure(resource_name: str, action: str) -> str:
    """The stack's reason when `resource_name`'s `action` was restricted (Heat's shape)."""
    detail = f"ResourceActionRestricted: resources.{resource_name}: {restricted_reason(action)}"
    return failure_reason(Action.UPDATE, detail)


class Cleanup(StrEnum):
    KEEP = "keep"  # the current goal adopted this row
    DELETE = "delete"  # delete the real resource, then the row
    FORGET = "forget"  # drop the row only (nothing real, or Retain)
    LET_GO = "let_go"  # adopted through external_id: drop the row, release a child stack


def decide_cleanup(row: ResourceRow, *, current_template_id: TemplateId | None) -> Cleanup:
    if row.template_id == current_template_id and row.replaced_by is None:
        return Cleanup.KEEP
    if row.external:
        return Cleanup.LET_GO
    if not row.exists or row.deletion_policy == "Retain":
        return Cleanup.FORGET
    return Cleanup.DELETE


def failure_reason(action: Action | str, detail: str) -> str:
    """Heat-style reason a person can act on."""
    detail = detail.strip()
    prefix = f"Resource {str(action).upper()} failed"
    return detail if detail.startswith(prefix) else f"{prefix}: {detail}"


def properties_after_failure(
    action: Action, applied: Mapping[str, Any] | None, attempted: Mapping[str, Any] | None
) -> Mapping[str, Any] | None:
    """The properties a row keeps after its `action` failed: what deleting the real
    resource needs. A failed create may still have made something (a server that
    went into ERROR), made from `attempted`; any other action keeps what was last
    `applied` (so a retried update applies its change again), or `attempted` when
    nothing was ever applied."""
    if action is Action.CREATE or applied is None:
        return attempted if attempted is not None else applied
    return applied


#: Failed resources named in a stack check's reason (the rest are counted).
CHECK_FAILURES_NAMED = 5


def check_failure_reason(failures: Sequence[tuple[str, str]]) -> str:
    """The reason of a stack check that found `failures` ((resource name, its reason) each)."""
    prefix = f"Resource {Action.CHECK.value} failed"
    named = [f"{name}: {reason.removeprefix(prefix).lstrip(': ') or reason}" for name, reason in failures]
    shown = "; ".join(named[:CHECK_FAILURES_NAMED])
    more = len(named) - CHECK_FAILURES_NAMED
    tail = f"; and {more} more" if more > 0 else ""
    return f"{prefix}: {shown}{tail}"
