"""A change to one resource row, as a typed record: only the fields set are written.

Where it sits: decisions (`results.decide_result`, `node_checks`,
`drift.heal_marks`, `healing.decide_heal`) and the engine's shell (checks, gates, observation,
signals, scaling) say what a row becomes as a `ResourceChange`; the store
writes exactly its set fields with a compare-and-swap on the row's version
(`store.resources.ResourceStatements.update_resource`). A field left unset
keeps the column as it is; setting one to None writes NULL. Its fields are the
row's writable columns, so a change to a column that does not exist cannot be
built. `a | b` is `a` with `b`'s set fields over it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final, TypeVar

from services.engine.core.model import Action, Node, ResourceId, Status, TemplateId, TraversalId


class Unset(Enum):
    """The value of a field a change leaves as it is."""

    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = Unset.UNSET
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class ResourceChange:
    physical_id: str | Unset | None = UNSET
    type: str | Unset = UNSET
    action: Action | Unset = UNSET
    status: Status | Unset = UNSET
    status_reason: str | Unset = UNSET
    properties: Mapping[str, Any] | Unset | None = UNSET
    attributes: Mapping[str, Any] | Unset = UNSET
    metadata: Mapping[str, Any] | Unset | None = UNSET  # resolved metadata (None: not resolved)
    requires: frozenset[ResourceId] | Unset = UNSET
    replaced_by: ResourceId | Unset | None = UNSET
    template_id: TemplateId | Unset | None = UNSET
    deletion_policy: str | Unset = UNSET
    external: bool | Unset = UNSET
    traversal_id: TraversalId | Unset | None = UNSET
    # The job in flight and what it applies when it succeeds.
    current_job: str | Unset | None = UNSET
    job_node: Node | Unset | None = UNSET
    job_properties: Mapping[str, Any] | Unset | None = UNSET
    job_requires: frozenset[ResourceId] | Unset | None = UNSET
    job_template_id: TemplateId | Unset | None = UNSET
    observing_job: str | Unset | None = UNSET
    # A newer traversal's check waiting for the job in flight.
    waiting_traversal: TraversalId | Unset | None = UNSET
    waiting_node: Node | Unset | None = UNSET
    # The gates of one node (`core.gates`): where it waits, what it passed, a pause's end.
    gate_traversal: TraversalId | Unset | None = UNSET
    gate_node: Node | Unset | None = UNSET
    gate_waiting: str | Unset | None = UNSET
    gate_passed: frozenset[str] | Unset = UNSET
    gate_until: float | Unset | None = UNSET  # seconds since the epoch

    # A change holds only the fields it sets, in its `__dict__` (`_set_only`); the others
    # read the class's UNSET.

    def written(self) -> dict[str, Any]:
        """The fields set, by column name, in the record's field order."""
        fields = self.__dict__
        return {name: fields[name] for name in sorted(fields, key=_ORDER.__getitem__)}

    @property
    def empty(self) -> bool:
        """Whether the change writes nothing."""
        return not self.__dict__

    def __or__(self, other: ResourceChange) -> ResourceChange:
        """This change with `other`'s set fields over it."""
        merged = object.__new__(ResourceChange)
        merged.__dict__.update(self.__dict__)
        merged.__dict__.update(other.__dict__)
        return merged


#: The columns a change may write, in the order a statement writes them.
COLUMNS: Final = tuple(f.name for f in dataclasses.fields(ResourceChange))
_ORDER: Final = {name: i for i, name in enumerate(COLUMNS)}


def _set_only(self: ResourceChange, **fields: Any) -> None:
    """`ResourceChange`'s constructor: keep the fields set (a field given UNSET is not).
    The frozen dataclass's own sets every one of its 28 fields through
    `object.__setattr__` (4.8 us a change against 2.4 here, and `|` 11 us against 0.6;
    a resource's check and result make several of each: docs/performance.md, stop 35);
    the class keeps its typed, keyword-only signature for callers and type checks.
    tests/unit/test_row_changes.py holds it to what the dataclass's own would make."""
    if not fields.keys() <= _ORDER.keys():
        unknown = ", ".join(sorted(fields.keys() - _ORDER.keys()))
        raise TypeError(f"ResourceChange() got unexpected keyword arguments: {unknown}")
    if UNSET in fields.values():
        fields = {name: value for name, value in fields.items() if value is not UNSET}
    self.__dict__.update(fields)


ResourceChange.__init__ = _set_only  # type: ignore[method-assign]

#: The change that writes nothing.
NO_CHANGE: Final = ResourceChange()


def set_or(value: T | Unset, default: T) -> T:
    """`value` if a change sets it, else `default`."""
    return default if isinstance(value, Unset) else value
