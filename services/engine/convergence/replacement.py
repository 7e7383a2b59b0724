"""Replacing a resource: a new row, created first; the old row is cleaned up later.

Where it sits: a forward node whose decision is a replacement (`checks`), or
an update job that answered REPLACE (`results`), calls `replace` with the
node's `Check` and the `core.node_checks.Replacement` decided: a new row
takes the resource's name (`replaces` the old one, which is marked
`replaced_by` it) and its create job is issued (`issuing`). The old row's
cleanup node deletes it once its dependents have moved to the new one
(`core.graph`: cleanup edges are reversed). The replacement's job finishes
the forward node, so a check of that node sent again finds the row replaced
and does nothing (`core.node_checks.moved_by_its_job`).
"""

from __future__ import annotations

import dataclasses

from services.engine.convergence.issuing import issue
from services.engine.convergence.shell import Check, update_row
from services.engine.core.node_checks import JobOrder, Replacement
from services.engine.core.row_change import ResourceChange
from shared.protocol import JobAction


async def replace(at: Check, replacement: Replacement) -> None:
    """Create a new row first; the old one is deleted by its cleanup node later."""
    tx, stack, row = at.tx, at.stack, at.row
    assert stack.current_template_id is not None
    (new_id,) = await tx.insert_resources(
        stack.stack_id,
        [(row.name, replacement.type_name, stack.current_template_id, replacement.deletion_policy)],
        replaces=row.resource_id,
    )
    await update_row(tx, row, ResourceChange(replaced_by=new_id))
    why = replacement.why
    reason = f"Replacing: {why}" if why else "Replacing"
    at.fx.event(stack.stack_id, row.name, row.physical_id, row.type, "UPDATE", "IN_PROGRESS", reason)
    new_row = await tx.resource(new_id)
    assert new_row is not None
    metadata = replacement.metadata
    if metadata is None:  # the replaced row's, carried over
        metadata = await tx.resource_metadata(row.resource_id)
    change = ResourceChange(metadata=metadata)
    job = JobOrder(JobAction.CREATE, replacement.properties, replacement.requires, change)
    await issue(dataclasses.replace(at, row=new_row), job)
