"""What a stack's outputs read of its current rows (`jobs.output_data`), for a stack
show and for a nested stack's answer to its parent alike: a failed resource passes its
error, a created one its reference data, one not created yet nothing.

Real: the rows as the store returns them (`ResourceRow`) and the builtin resource types.
"""

from __future__ import annotations

import uuid

from services.engine.core.model import Action, ResourceId, ResourceRow, StackId, Status
from services.engine.jobs import output_data
from shared.plugins.registry import load_types

STACK = StackId(uuid.UUID(int=1))


def row(name: str, status: Status, *, physical_id: str | None = None, reason: str = "") -> ResourceRow:
    return ResourceRow(
        ResourceId(len(name)),
        STACK,
        name,
        "OS::Heat::TestResource",
        physical_id,
        Action.CREATE,
        status,
        status_reason=reason,
        attributes={"output": f"{name}-out"} if physical_id else {},
    )


def test_outputs_read_a_failure_as_its_error_a_created_resource_as_its_data_and_nothing_else() -> None:
    rows = {
        "made": row("made", Status.COMPLETE, physical_id="phys-1"),
        "broke": row("broke", Status.FAILED, reason="quota exceeded"),
        "silent": row("silent", Status.FAILED),
        "pending": row("pending", Status.IN_PROGRESS),
    }
    data = output_data(rows, dict(load_types()))
    assert set(data) == {"made", "broke", "silent"}
    assert (data["made"].reference_id, dict(data["made"].attributes), data["made"].error) == (
        "phys-1",
        {"output": "made-out"},
        None,
    )
    assert (data["broke"].reference_id, data["broke"].error) == (None, "quota exceeded")
    assert data["silent"].error == "the resource failed"
