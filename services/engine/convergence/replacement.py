"""Replacing a resource: a new row, created first; the old row is cleaned up later.

Where it sits: a forward node whose decision is a replacement (`checks`), or
an update job that answered REPLACE (`results`), calls `replace`: a new row
takes the resource's name (`replaces` the old one, which is marked
`replaced_by` it) and its create job is issued (`issuing`). The old row's
cleanup node deletes it once its dependents have moved to the new one
(`core.graph`: cleanup edges are reversed). The replacement's job finishes
the forward node, so a check of that node sent again finds the row replaced
and does nothing (`checks.moved_by_its_job`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.engine.convergence.issuing import issue
from services.engine.convergence.shell import Shell, update_row
from services.engine.core.model import Node, ResourceId, ResourceRow, StackRow, TraversalId
from services.engine.core.row_change import UNSET, ResourceChange, set_or
from services.engine.effects import Effects
from services.engine.store.tx import Tx
from shared.protocol import JobAction


async def replace(
    shell: Shell,
    tx: Tx,
    stack: StackRow,
    traversal: TraversalId,
    node: Node,
    row: ResourceRow,
    type_name: str,
    properties: Mapping[str, Any],
    requires: frozenset[ResourceId],
    adopt: ResourceChange,
    fx: Effects,
    *,
    why: str,
) -> None:
    """Create a new row first; the old one is deleted by its cleanup node later."""
    assert stack.current_template_id is not None
    (new_id,) = await tx.insert_resources(
        stack.stack_id,
        [(row.name, type_name, stack.current_template_id, set_or(adopt.deletion_policy, "Delete"))],
        replaces=row.resource_id,
    )
    await update_row(tx, row, ResourceChange(replaced_by=new_id))
    fx.event(
        stack.stack_id,
        row.name,
        row.physical_id,
        row.type,
        "UPDATE",
        "IN_PROGRESS",
        f"Replacing: {why}" if why else "Replacing",
    )
    replacement = await tx.resource(new_id)
    assert replacement is not None
    metadata = adopt.metadata if adopt.metadata is not UNSET else await tx.resource_metadata(row.resource_id)
    await issue(
        shell,
        tx,
        stack,
        traversal,
        node,
        replacement,
        JobAction.CREATE,
        properties,
        requires,
        fx,
        change=ResourceChange(metadata=metadata),
    )
