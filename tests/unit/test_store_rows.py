"""A resource row read from the database is the `ResourceRow` its columns describe.

`store.rows.resource_row` builds the frozen dataclass without its `__init__` (a batch
reads thousands of rows): these tests hold it to what the constructor would make.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any, cast

import pytest

from services.engine.core.model import Action, ResourceRow, Status
from services.engine.store.driver import Record
from services.engine.store.rows import RESOURCE_COLUMNS, resource_row


def _columns(**overrides: Any) -> dict[str, Any]:
    """Every column with a value unlike its field's default, as a record gives them."""
    values: dict[str, Any] = {
        "resource_id": 7,
        "stack_id": uuid.uuid4(),
        "name": "server",
        "type": "OS::Nova::Server",
        "physical_id": "p-7",
        "action": "UPDATE",
        "status": "FAILED",
        "status_reason": "it broke",
        "properties": {"flavor": "small"},
        "attributes": {"ip": "10.0.0.7"},
        "requires": [3, 5],
        "replaces": 2,
        "replaced_by": 9,
        "template_id": uuid.uuid4(),
        "deletion_policy": "Retain",
        "current_job": "job-1",
        "job_node": 15,
        "job_properties": {"flavor": "large"},
        "job_requires": [5],
        "job_template_id": uuid.uuid4(),
        "traversal_id": uuid.uuid4(),
        "version": 4,
        "waiting_traversal": uuid.uuid4(),
        "waiting_node": 14,
        "external": True,
    }
    return {**values, **overrides}


def test_every_field_of_a_resource_row_is_a_column_read() -> None:
    fields = {f.name for f in dataclasses.fields(ResourceRow)}
    assert fields == {c.strip() for c in RESOURCE_COLUMNS.split(",")}
    assert set(_columns()) == fields


def test_a_row_read_equals_the_one_the_constructor_makes_from_its_columns() -> None:
    columns = _columns()
    expected = ResourceRow(
        **{
            **columns,
            "action": Action.UPDATE,
            "status": Status.FAILED,
            "requires": frozenset({3, 5}),
            "job_requires": frozenset({5}),
        }
    )
    row = resource_row(cast(Record, columns))
    assert row == expected
    assert type(row.action) is Action
    assert type(row.status) is Status


def test_null_arrays_and_attributes_read_as_the_defaults() -> None:
    row = resource_row(cast(Record, _columns(attributes=None, requires=None, job_requires=None)))
    assert row.attributes == {}
    assert row.requires == frozenset()
    assert row.job_requires is None


def test_a_row_read_stays_frozen() -> None:
    row = resource_row(cast(Record, _columns()))
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.name = "other"  # type: ignore[misc]


def test_a_resource_row_has_no_post_init_that_reading_would_skip() -> None:
    assert not hasattr(ResourceRow, "__post_init__")
