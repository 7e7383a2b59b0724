"""Drift: what counts as drift, and the row marks that make a check heal it. Pure."""

from __future__ import annotations

from typing import Any

import pytest

from services.engine.core.drift import DriftKind, find_drift, heal_marks
from services.engine.core.model import Action, Status
from services.engine.core.row_change import ResourceChange
from shared.plugins import ObservedState, Properties, UpdateRule, prop


class Server(Properties):
    name: str | None = prop(None, description="In place.")
    image: str = prop("cirros", description="Replaces.", update=UpdateRule.REPLACE)
    size: int = prop(1, description="In place.")


APPLIED: dict[str, Any] = {"name": "web", "image": "debian"}


@pytest.mark.parametrize(
    ("observed", "differences"),
    [
        ({"name": "web", "image": "debian"}, None),
        ({"name": "web", "image": "debian", "size": 9}, None),  # the template does not set size
        ({"name": "web"}, None),  # image not reported: not judged
        ({"name": "other", "image": "debian"}, {"name": {"expected": "web", "actual": "other"}}),
        (
            {"name": "x", "image": "arch"},
            {"image": {"expected": "debian", "actual": "arch"}, "name": {"expected": "web", "actual": "x"}},
        ),
    ],
)
def test_only_properties_the_template_sets_and_the_provider_reports_are_compared(
    observed: dict[str, Any], differences: dict[str, Any] | None
) -> None:
    drift = find_drift(Server, APPLIED, ObservedState.READY, observed)
    if differences is None:
        assert drift is None
    else:
        assert drift is not None
        assert drift.kind is DriftKind.CHANGED
        assert drift.differences == differences
        assert all(name in drift.reason for name in differences)


def test_a_number_reported_for_a_string_property_is_not_drift() -> None:
    assert find_drift(Server, {"name": "5"}, ObservedState.READY, {"name": 5}) is None


@pytest.mark.parametrize(
    ("state", "kind"),
    [(ObservedState.GONE, DriftKind.GONE), (ObservedState.FAILED, DriftKind.ERROR)],
)
def test_a_resource_gone_or_in_error_has_drifted(state: ObservedState, kind: DriftKind) -> None:
    drift = find_drift(Server, APPLIED, state, None, "disk full")
    assert drift is not None
    assert drift.kind is kind
    assert ("disk full" in drift.reason) is (kind is DriftKind.ERROR)


def test_a_resource_in_transition_or_without_reported_properties_is_not_judged() -> None:
    assert find_drift(Server, APPLIED, ObservedState.IN_PROGRESS, {"name": "x"}) is None
    assert find_drift(Server, APPLIED, ObservedState.READY, None) is None


def test_heal_marks_make_the_forward_check_update_recreate_or_replace() -> None:
    changed = find_drift(Server, APPLIED, ObservedState.READY, {"name": "other"})
    assert changed is not None
    assert heal_marks(changed) == ResourceChange(properties={"name": "other", "image": "debian"})
    gone = find_drift(Server, APPLIED, ObservedState.GONE, None)
    assert gone is not None
    assert heal_marks(gone).physical_id is None
    broken = find_drift(Server, APPLIED, ObservedState.FAILED, None)
    assert broken is not None
    assert heal_marks(broken) == ResourceChange(
        action=Action.CHECK, status=Status.FAILED, status_reason=broken.reason
    )
