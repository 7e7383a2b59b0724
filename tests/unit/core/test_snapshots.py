"""What a snapshot shows and the goal a restore converges to. Pure."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from services.engine.core.model import Action, StackId, StackRow, Status, TraversalId
from services.engine.core.snapshots import restore_goal, shown_status
from shared.plugins import ResourceType


class Kept(ResourceType):
    type_name = "Test::Kept"
    supports_snapshot = True

    @classmethod
    def restore_properties(cls, properties: Mapping[str, Any], data: Mapping[str, Any]) -> Mapping[str, Any]:
        return {**properties, "source": data["copy"]}


class Plain(ResourceType):
    type_name = "Test::Plain"


def test_a_restore_rewrites_only_the_properties_of_types_that_kept_their_own_snapshot() -> None:
    template: dict[str, Any] = {
        "heat_template_version": "2016-10-14",
        "resources": {
            "vol": {"type": "Test::Kept", "properties": {"size": {"get_param": "size"}}},
            "other": {"type": "Test::Plain", "properties": {"x": 1}},
        },
    }
    document = {
        "template": template,
        "environment": {"parameter_defaults": {"size": 2}},
        "parameters": {"size": 3},
        "files": {"f": "x"},
        "resources": {
            "vol": {"type": "Test::Kept", "resource_data": {"copy": "snap-1"}},
            "other": {"type": "Test::Plain", "resource_data": {"copy": "ignored"}},
        },
    }
    restored, environment, parameters, files = restore_goal(
        document, {"Test::Kept": Kept, "Test::Plain": Plain}
    )
    assert restored["resources"]["vol"]["properties"] == {"size": {"get_param": "size"}, "source": "snap-1"}
    assert restored["resources"]["other"]["properties"] == {"x": 1}
    assert template["resources"]["vol"]["properties"] == {"size": {"get_param": "size"}}, "not changed"
    assert (environment, parameters, files) == ({"parameter_defaults": {"size": 2}}, {"size": 3}, {"f": "x"})


def test_a_snapshot_whose_action_was_preempted_shows_failed() -> None:
    snapshot = TraversalId(uuid.uuid4())

    def stack(traversal: TraversalId, status: Status) -> StackRow:
        return StackRow(StackId(uuid.uuid4()), "p", "s", Action.SNAPSHOT, status, "", traversal, None, None)

    assert shown_status("IN_PROGRESS", snapshot, stack(snapshot, Status.IN_PROGRESS)) == ("IN_PROGRESS", None)
    status, reason = shown_status(
        "IN_PROGRESS", snapshot, stack(TraversalId(uuid.uuid4()), Status.IN_PROGRESS)
    )
    assert status == "FAILED"
    assert reason is not None
    assert shown_status("COMPLETE", snapshot, stack(TraversalId(uuid.uuid4()), Status.COMPLETE)) == (
        "COMPLETE",
        None,
    )
