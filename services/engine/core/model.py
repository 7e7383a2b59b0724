"""Records the convergence decisions work on, and Heat's state names."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NewType

StackId = NewType("StackId", uuid.UUID)
TraversalId = NewType("TraversalId", uuid.UUID)
TemplateId = NewType("TemplateId", uuid.UUID)
ResourceId = NewType("ResourceId", int)
Node = NewType("Node", int)  # resource_id * 2 + 1 forward, * 2 cleanup


class Action(StrEnum):
    INIT = "INIT"
    CREATE = "CREATE"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    ROLLBACK = "ROLLBACK"
    CHECK = "CHECK"
    SUSPEND = "SUSPEND"
    RESUME = "RESUME"
    ADOPT = "ADOPT"
    SNAPSHOT = "SNAPSHOT"
    RESTORE = "RESTORE"


#: Stack operations that keep the goal and run their action on each resource as it is.
STACK_ACTIONS = frozenset({Action.CHECK, Action.SUSPEND, Action.RESUME, Action.SNAPSHOT})


class Status(StrEnum):
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


def forward(resource_id: int) -> Node:
    return Node(resource_id * 2 + 1)


def cleanup(resource_id: int) -> Node:
    return Node(resource_id * 2)


def resource_of(node: int) -> ResourceId:
    return ResourceId(node // 2)


def is_forward(node: int) -> bool:
    return node % 2 == 1


@dataclass(frozen=True)
class StackRow:
    stack_id: StackId
    project_id: str
    name: str
    action: Action
    status: Status
    status_reason: str
    current_traversal: TraversalId | None
    current_template_id: TemplateId | None
    previous_template_id: TemplateId | None
    disable_rollback: bool = False
    timeout_mins: int | None = None
    # A child stack (nested stack): its parent stack and the resource owning it,
    # the parent's job its current operation answers (None once answered), and
    # its depth (0 for a top-level stack).
    owner_stack_id: StackId | None = None
    owner_resource_id: ResourceId | None = None
    owner_job_id: str | None = None
    nested_depth: int = 0
    # The top of its tree (itself for a top-level stack; None only in a draft).
    root_stack_id: StackId | None = None

    @property
    def root(self) -> StackId:
        """The top-level stack of this stack's tree."""
        return self.root_stack_id or self.stack_id


@dataclass(frozen=True)
class ResourceRow:
    resource_id: ResourceId
    stack_id: StackId
    name: str
    type: str
    physical_id: str | None
    action: Action
    status: Status
    status_reason: str = ""
    properties: Mapping[str, Any] | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)
    requires: frozenset[ResourceId] = frozenset()
    replaces: ResourceId | None = None
    replaced_by: ResourceId | None = None
    template_id: TemplateId | None = None
    deletion_policy: str = "Delete"
    current_job: str | None = None
    job_node: Node | None = None
    job_properties: Mapping[str, Any] | None = None
    job_requires: frozenset[ResourceId] | None = None
    job_template_id: TemplateId | None = None
    traversal_id: TraversalId | None = None
    version: int = 0
    waiting_traversal: TraversalId | None = None
    waiting_node: Node | None = None
    # Adopted through `external_id`: not managed, never deleted, only let go of.
    external: bool = False

    @property
    def exists(self) -> bool:
        """Whether a real resource may stand behind this row."""
        return self.physical_id is not None


@dataclass(frozen=True, slots=True)
class Reference:
    """What a resource's dependents read from its current row (`jobs.reference_data`):
    its id, type, physical id and attributes, without the rest of the row (a batch
    reads these ahead for its forward checks: `Tx.read_references`)."""

    resource_id: ResourceId
    stack_id: StackId
    name: str
    type: str
    physical_id: str | None
    attributes: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class RowLinks:
    """What a traversal's graph reads of an existing row (`core.graph.traversal_graph`):
    its id and name, and the links stored on it, without the rest of the row (an update
    claims these of every row of its stack: `Tx.claim_links`)."""

    resource_id: ResourceId
    name: str
    replaced_by: ResourceId | None
    replaces: ResourceId | None
    requires: frozenset[ResourceId]
    job_requires: frozenset[ResourceId] | None


@dataclass(frozen=True)
class GraphNode:
    node: Node
    requires: frozenset[Node]
    dependents: frozenset[Node]
