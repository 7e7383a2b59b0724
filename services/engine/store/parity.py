"""Statements of Heat-parity features (mixed into `Tx`): gates, the converge flag,
resource metadata and a stack's own settings.

Where it sits: `services.engine.gates` reads a row's gate state (written with
`Tx.update_resource`, a compare-and-swap like every row change) and whether
a traversal converges (observes before deciding);
`services.engine.convergence.checks` writes a row's resolved metadata with its other changes, and
`services.engine.nested.children` reads it back for a child's
`resource_facade`; `services.engine.operations` reads and writes the tags,
timeout and rollback setting an update may change; the engine's timer passes
the batch pauses that are due (`end_pauses`). These columns are read
only here, so a check that uses no gate costs no extra statement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from services.engine.core.gates import GateState
from services.engine.core.model import Node, ResourceId, StackId, TraversalId
from services.engine.core.updates import StackSettings

if TYPE_CHECKING:
    from services.engine.store.driver import Conn


class ParityStatements:
    _c: Conn

    async def gate_state(self, resource_id: int) -> GateState:
        r = await self._c.fetchrow(
            """SELECT gate_traversal, gate_node, gate_waiting, gate_passed FROM resources
               WHERE resource_id = $1""",
            resource_id,
        )
        if r is None:
            return GateState()
        node = Node(r["gate_node"]) if r["gate_node"] is not None else None
        return GateState(r["gate_traversal"], node, r["gate_waiting"], frozenset(r["gate_passed"] or ()))

    async def set_converge(self, traversal: TraversalId) -> None:
        """Make `traversal` observe each existing resource before deciding (`converge: true`)."""
        await self._c.execute("UPDATE traversals SET converge = true WHERE traversal_id = $1", traversal)

    async def converges(self, traversal: TraversalId) -> bool:
        found = await self._c.fetchval("SELECT converge FROM traversals WHERE traversal_id = $1", traversal)
        return bool(found)

    async def hooks_waiting(self, stack_id: StackId, traversal: TraversalId) -> list[str]:
        """Names of the stack's resources paused at a hook in `traversal`."""
        rows = await self._c.fetch(
            """SELECT name FROM resources
               WHERE stack_id = $1 AND gate_traversal = $2 AND gate_waiting LIKE 'pre-%'
               ORDER BY name""",
            stack_id,
            traversal,
        )
        return [r["name"] for r in rows]

    async def end_pauses(
        self, now: float, *, limit: int = 500
    ) -> list[tuple[StackId, TraversalId, Node, ResourceId]]:
        """Pass every batch `pause` gate due at `now` (a compare-and-swap like any row
        change: the version moves on); (stack, traversal, node, resource) of each, whose
        check is to be sent again."""
        rows = await self._c.fetch(
            """UPDATE resources SET gate_waiting = NULL, gate_until = NULL,
                      gate_passed = array_append(gate_passed, 'pause'),
                      version = version + 1, updated_at = now()
               WHERE resource_id IN (SELECT resource_id FROM resources
                                     WHERE gate_until IS NOT NULL AND gate_until <= $1
                                       AND gate_waiting = 'pause'
                                     ORDER BY gate_until LIMIT $2 FOR UPDATE SKIP LOCKED)
               RETURNING stack_id, gate_traversal, gate_node, resource_id""",
            now,
            limit,
        )
        return [(r["stack_id"], r["gate_traversal"], Node(r["gate_node"]), r["resource_id"]) for r in rows]

    async def resource_metadata(self, resource_id: int) -> dict[str, Any] | None:
        """The row's resolved metadata (None: not resolved since it was made)."""
        found: dict[str, Any] | None = await self._c.fetchval(
            "SELECT metadata FROM resources WHERE resource_id = $1", resource_id
        )
        return found

    async def stack_settings(self, stack_id: StackId) -> StackSettings | None:
        r = await self._c.fetchrow(
            "SELECT tags, timeout_mins, disable_rollback FROM stacks WHERE stack_id = $1", stack_id
        )
        if r is None:
            return None
        return StackSettings(tuple(r["tags"] or ()), r["timeout_mins"], r["disable_rollback"])

    async def set_stack_settings(self, stack_id: StackId, settings: StackSettings) -> None:
        await self._c.execute(
            "UPDATE stacks SET tags = $2, timeout_mins = $3, disable_rollback = $4 WHERE stack_id = $1",
            stack_id,
            list(settings.tags),
            settings.timeout_mins,
            settings.disable_rollback,
        )
