"""A typed row change writes exactly the columns it sets, with a compare-and-swap.

Pure: the records and the SQL they become are built without a database (the
statements run against PostgreSQL in the integration tests)."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from services.engine.core.model import Action, Node, ResourceId, Status, TraversalId
from services.engine.core.results import JOB_DONE
from services.engine.core.row_change import COLUMNS, NO_CHANGE, UNSET, ResourceChange, set_or
from services.engine.store.resources import update_statement
from services.engine.store.software_records import DeploymentChange

TRAVERSAL = TraversalId(uuid.UUID(int=7))


def test_a_change_writes_only_the_fields_it_sets_and_none_is_written_as_null() -> None:
    change = ResourceChange(status=Status.FAILED, replaced_by=None)

    assert change.written() == {"status": Status.FAILED, "replaced_by": None}
    assert change.physical_id is UNSET
    assert not change.empty
    assert NO_CHANGE.empty
    assert NO_CHANGE.written() == {}


def test_a_change_to_a_column_that_does_not_exist_cannot_be_built() -> None:
    with pytest.raises(TypeError):
        ResourceChange(colour="red")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        ResourceChange(Status.FAILED)  # type: ignore[call-arg]  # by keyword only


def test_every_field_reads_what_it_was_given_and_every_other_reads_unset() -> None:
    # ResourceChange keeps only the fields set (`row_change._set_only`, in place of the
    # frozen dataclass's constructor): each column, set alone, is the one it writes.
    for column in COLUMNS:
        value = object()
        change = ResourceChange(**{column: value})  # type: ignore[arg-type]
        assert [name for name in COLUMNS if getattr(change, name) is not UNSET] == [column]
        assert getattr(change, column) is value
        assert change.written() == {column: value}
        assert change == dataclasses.replace(NO_CHANGE, **{column: value})
    everything = ResourceChange(**{column: column for column in COLUMNS})  # type: ignore[arg-type]
    assert list(everything.written()) == list(COLUMNS), "written in the columns' order"


def test_a_field_given_unset_is_left_unset_and_a_change_cannot_be_altered() -> None:
    change = ResourceChange(type=UNSET, status=Status.FAILED)
    assert change.written() == {"status": Status.FAILED}
    assert ResourceChange(type=UNSET).empty
    assert ResourceChange(type=UNSET) == NO_CHANGE
    with pytest.raises(dataclasses.FrozenInstanceError):
        change.type = "T"  # type: ignore[misc]
    merged = change | ResourceChange(type="T")
    assert (change.type, merged.type, merged.status) == (UNSET, "T", Status.FAILED), "the operands stay"


def test_the_later_change_wins_where_both_set_a_field() -> None:
    issued = ResourceChange(action=Action.UPDATE, current_job="j1", type="A")
    merged = issued | ResourceChange(type="B", metadata=None)

    assert merged.written() == {"type": "B", "action": Action.UPDATE, "metadata": None, "current_job": "j1"}
    assert (ResourceChange(current_job="j1") | JOB_DONE).current_job is None
    assert set_or(merged.type, "C") == "B"
    assert set_or(merged.physical_id, "p0") == "p0"


def test_the_update_bumps_the_version_only_where_the_row_is_still_the_one_read() -> None:
    sql, values = update_statement(ResourceChange(status_reason="x", physical_id="p1"))

    assignments = sql.split("SET", 1)[1].split("WHERE", 1)[0]
    assert [a.strip() for a in assignments.split(",")] == [
        "physical_id = $3",
        "status_reason = $4",
        "version = version + 1",
        "updated_at = now()",
    ]
    assert "WHERE resource_id = $1 AND version = $2 RETURNING 1" in " ".join(sql.split())
    assert values == ["p1", "x"]


def test_the_update_writes_states_by_name_and_id_sets_as_sorted_arrays() -> None:
    change = ResourceChange(
        action=Action.CHECK,
        requires=frozenset({ResourceId(9), ResourceId(2)}),
        gate_passed=frozenset({"pre-update", "observe"}),
        waiting_traversal=TRAVERSAL,
        waiting_node=Node(5),
    )

    sql, values = update_statement(change)

    assert values == ["CHECK", [2, 9], TRAVERSAL, Node(5), ["observe", "pre-update"]]
    assert type(values[0]) is str
    assert "gate_passed = $7" in sql


def test_the_same_columns_give_the_same_statement() -> None:
    first, _ = update_statement(ResourceChange(status=Status.COMPLETE, attributes={"a": 1}))
    second, values = update_statement(ResourceChange(attributes={"b": 2}, status=Status.FAILED))

    assert first == second
    assert values == ["FAILED", {"b": 2}]


def test_a_deployment_change_writes_the_fields_it_sets_and_copies_its_values() -> None:
    outputs = {"deploy_stdout": "ok"}
    change = DeploymentChange(status="COMPLETE", output_values=outputs)

    assert change.written() == {"output_values": outputs, "status": "COMPLETE"}
    assert change.written()["output_values"] is not outputs
    assert DeploymentChange().empty
