"""What every part of the convergence shell is handed, a check's context, and two row writes.

Where it sits: `handling.Convergence` builds one `Shell` from the engine's
dependencies (`deps.EngineDeps`: store, outbox, definitions, plugin types,
limits, the template pool, ...) and the nested-stack and gate shells, and
passes it to the functions of `checks`, `results`, `replacement`, `reaping`
and `propagation`, which read rows through the transaction they are given,
decide with `services.engine.core` and write. A node being checked (or the
node a job result finishes) travels as one `Check`: the shell, the
transaction, the stack, the traversal, the node, its row and the effects
gathered. `update_row` and `delete_row` are the compare-and-swap writes they
all use: a row changed since it was read is a conflict, retried by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.engine.core.model import Node, ResourceRow, StackRow, TraversalId
from services.engine.core.row_change import ResourceChange
from services.engine.deps import EngineDeps
from services.engine.effects import Effects
from services.engine.gates import Gates
from services.engine.nested.children import Children
from services.engine.store.tx import Tx
from shared.errors import ConflictError


@dataclass(frozen=True)
class Shell:
    deps: EngineDeps  # the store, the outbox, the goals, the types, the limits, ...
    # Hooks and converge's observations, between a node's decision and its action.
    gates: Gates
    children: Children  # nested stack jobs: a child stack's operation


@dataclass(frozen=True)
class Check:
    """A node's check under way (or the node a job's result acts for): what every step
    of it reads, writes and gathers its effects through."""

    shell: Shell
    tx: Tx
    stack: StackRow
    traversal: TraversalId
    node: Node
    row: ResourceRow  # the node's resource, as read in this transaction
    fx: Effects


async def update_row(tx: Tx, row: ResourceRow, change: ResourceChange) -> None:
    """Write `change` on `row` unless it changed since it was read (then a conflict)."""
    if not await tx.update_resource(row, change):
        raise ConflictError(f"resource {row.resource_id} changed concurrently; will retry")


async def delete_row(tx: Tx, row: ResourceRow) -> None:
    """Delete `row` unless it changed since it was read (then a conflict)."""
    if not await tx.delete_resource(row):
        raise ConflictError(f"resource {row.resource_id} changed concurrently; will retry")
