"""What every part of the convergence shell is handed, and its two row writes.

Where it sits: `handling.Convergence` builds one `Shell` from the engine's
dependencies (store, outbox, definitions, plugin types, limits, the template
pool, the nested-stack and gate shells) and passes it to the functions of
`checks`, `results`, `replacement`, `reaping` and `propagation`, which read
rows through the transaction they are given, decide with `services.engine.core`
and write. `update_row` and `delete_row` are the compare-and-swap writes they
all use: a row changed since it was read is a conflict, retried by the caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from services.engine.core.model import ResourceRow
from services.engine.core.quotas import Quotas
from services.engine.core.row_change import ResourceChange
from services.engine.core.sources import RANDOM_IDS, WALL_CLOCK, Clock, Ids
from services.engine.definitions import DefinitionCache
from services.engine.gates import Gates
from services.engine.nested.answer import Answers
from services.engine.nested.children import Children
from services.engine.outbox import Outbox
from services.engine.store import Store
from services.engine.store.tx import Tx
from services.engine.template import TemplateLimits
from services.engine.template_pool import TemplateRunner
from shared.errors import ConflictError
from shared.plugins import ResourceType


@dataclass(frozen=True)
class Shell:
    store: Store
    outbox: Outbox
    definitions: DefinitionCache
    types: Mapping[str, type[ResourceType]]
    limits: TemplateLimits
    quotas: Quotas
    templates: TemplateRunner
    config_bytes: int  # largest config a config resource stores
    answers: Answers  # a child stack's operation answering its parent's job
    # Hooks and converge's observations, between a node's decision and its action.
    gates: Gates
    children: Children  # nested stack jobs: a child stack's operation
    clock: Clock = WALL_CLOCK  # job deadlines, wait conditions
    ids: Ids = RANDOM_IDS  # job and traversal ids


async def update_row(tx: Tx, row: ResourceRow, change: ResourceChange) -> None:
    """Write `change` on `row` unless it changed since it was read (then a conflict)."""
    if not await tx.update_resource(row, change):
        raise ConflictError(f"resource {row.resource_id} changed concurrently; will retry")


async def delete_row(tx: Tx, row: ResourceRow) -> None:
    """Delete `row` unless it changed since it was read (then a conflict)."""
    if not await tx.delete_resource(row):
        raise ConflictError(f"resource {row.resource_id} changed concurrently; will retry")
