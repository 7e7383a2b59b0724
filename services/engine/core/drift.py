"""Drift: how an observed resource differs from what Converge applied. Pure.

Where it sits: the engine's observation handler (`services.engine.observation`)
gets what an observer saw of a settled resource, asks `find_drift` whether
it drifted, and, when the stack heals, applies `heal_marks` to the row so that
an ordinary forward check puts the world back: a changed property is updated
in place or the resource replaced (by its type's update rules), a resource
that is gone is created again, one in an error state is replaced.

Only what the template sets is compared; a property the provider does not
report is not judged, and neither is a resource still in transition.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import ValidationError

from services.engine.core.model import Action, Status
from services.engine.core.row_change import ResourceChange
from services.engine.template import diff_properties
from shared.plugins import ObservedState, Properties


class DriftKind(StrEnum):
    CHANGED = "changed"  # properties differ from what was applied
    GONE = "gone"
    ERROR = "error"


@dataclass(frozen=True)
class Drift:
    kind: DriftKind
    reason: str
    # property -> {"expected": applied value, "actual": observed value}
    differences: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    actual: Mapping[str, Any] = field(default_factory=dict)  # the applied properties, observed values in


def find_drift(
    schema: type[Properties],
    applied: Mapping[str, Any],
    state: ObservedState,
    observed: Mapping[str, Any] | None,
    reason: str = "",
) -> Drift | None:
    """The drift of a resource whose applied properties are `applied`; None if in line."""
    if state is ObservedState.GONE:
        return Drift(DriftKind.GONE, "the resource no longer exists")
    if state is ObservedState.FAILED:
        detail = f": {reason}" if reason else ""
        return Drift(DriftKind.ERROR, f"the resource is in an error state{detail}")
    if state is ObservedState.IN_PROGRESS or observed is None:
        return None
    applied = _normalised(schema, applied)
    actual = _normalised(schema, {**applied, **{k: observed[k] for k in applied if k in observed}})
    changed = diff_properties(schema, applied, actual).changed
    if not changed:
        return None
    differences = {k: {"expected": applied.get(k), "actual": actual.get(k)} for k in sorted(changed)}
    return Drift(DriftKind.CHANGED, f"changed out of band: {', '.join(sorted(changed))}", differences, actual)


def _normalised(schema: type[Properties], values: Mapping[str, Any]) -> dict[str, Any]:
    """`values` as the type's schema reads them (a provider may report 5 for "5")."""
    try:
        return schema.model_validate(dict(values)).model_dump(mode="json", include=set(values))
    except ValidationError:
        return dict(values)


def heal_marks(drift: Drift) -> ResourceChange:
    """Row changes after which a forward check converges the resource back to its goal."""
    if drift.kind is DriftKind.CHANGED:
        return ResourceChange(properties=dict(drift.actual))  # the diff against the goal now shows the drift
    if drift.kind is DriftKind.GONE:
        return missing_marks(drift.reason)
    return ResourceChange(action=Action.CHECK, status=Status.FAILED, status_reason=drift.reason)


def missing_marks(reason: str) -> ResourceChange:
    """Row changes recording that the resource no longer exists: nothing real is behind
    the row any more, so an update, a heal or a rollback creates it again (a check or
    an observation found it gone; the row keeps its properties)."""
    return ResourceChange(physical_id=None, action=Action.CHECK, status=Status.FAILED, status_reason=reason)
