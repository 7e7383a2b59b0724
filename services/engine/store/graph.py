"""Statements of a traversal's graph (mixed into `Tx`): its nodes, sync points and sinks.

Where it sits: `services.engine.traversal` stores the graph of a new
traversal (`start_traversal`: one row per node, naming the dependents to
trigger directly and the sync points to report to); a check reads its node
(`node`) and, once the node's outcome is known, marks it done
(`finish_node`), reports to the sync points that wait on it (`satisfy`) and
counts the traversal's sinks down (`count_down`), in that order, so row locks
are always taken node -> dependents -> traversal -> stack.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from services.engine.core.model import GraphNode, Node, StackId, TraversalId
from services.engine.store.driver import Conn
from services.engine.store.prefetch import NodeState, Prefetched


@dataclass(frozen=True)
class FinishedNode:
    direct: tuple[Node, ...]  # dependents to trigger now
    synced: tuple[Node, ...]  # dependents that are sync points


class GraphStatements:
    _c: Conn  # the transaction's connection (`Tx`; `Watched` while prefetched rows are served)
    _raw: Conn  # the connection itself: writes that forget exactly their own row
    _reads: Prefetched | None

    async def start_traversal(
        self, stack_id: StackId, traversal: TraversalId, graph: Mapping[Node, GraphNode]
    ) -> None:
        """Store the graph of `traversal`. Older traversals of the stack are left
        alone (checks of them may still be committing) and pruned later.

        The traversal counts its sinks (nodes nothing depends on) down, not every
        node: a node is checked only once all it requires is done, so the
        traversal is over exactly when its last sink is; the other nodes'
        completions never touch the traversal's row (`count_down`)."""
        sinks = sum(1 for n in graph.values() if not n.dependents)
        await self._c.execute(
            "INSERT INTO traversals (traversal_id, stack_id, remaining) VALUES ($1, $2, $3)",
            traversal,
            stack_id,
            sinks,
        )

        def split(n: GraphNode) -> tuple[list[Node], list[Node]]:
            direct = sorted(d for d in n.dependents if len(graph[d].requires) == 1)
            return direct, sorted(d for d in n.dependents if len(graph[d].requires) > 1)

        await self._c.copy_records_to_table(
            "traversal_nodes",
            columns=["traversal_id", "node", "requires_count", "direct", "synced"],
            records=[(traversal, n.node, len(n.requires), *split(n)) for n in graph.values()],
        )

    async def node(self, traversal: TraversalId, node: Node) -> NodeState | None:
        if self._reads is not None and (traversal, node) in self._reads.nodes:
            return self._reads.nodes[(traversal, node)]
        r = await self._c.fetchrow(
            "SELECT requires_count, done FROM traversal_nodes WHERE traversal_id = $1 AND node = $2",
            traversal,
            node,
        )
        return NodeState(r["requires_count"], r["done"]) if r is not None else None

    async def satisfy(
        self, reports: Iterable[tuple[TraversalId, Node, Node]]
    ) -> list[tuple[TraversalId, Node]]:
        """Record each (traversal, sync point, finished predecessor) of `reports`, in one
        statement; the sync points that this made ready.

        The rows are locked in (traversal, node) order, so batches of two engines
        never deadlock on them, and the lock makes it atomic: of two engines
        reporting the last two predecessors at once, exactly one sees the node
        become ready. A predecessor reported again changes nothing.
        """
        entries = sorted(set(reports))
        if not entries:
            return []
        rows = await self._raw.fetch(  # `satisfied` is not prefetched: nothing to forget
            """WITH reported AS (
                   SELECT t, n, array_agg(b) AS bys
                   FROM unnest($1::uuid[], $2::bigint[], $3::bigint[]) AS r(t, n, b) GROUP BY t, n),
               locked AS (
                   SELECT tn.traversal_id, tn.node, tn.satisfied, r.bys
                   FROM traversal_nodes tn JOIN reported r ON tn.traversal_id = r.t AND tn.node = r.n
                   ORDER BY tn.traversal_id, tn.node FOR UPDATE OF tn),
               added AS (
                   SELECT traversal_id, node,
                          satisfied || ARRAY(SELECT DISTINCT b FROM unnest(bys) AS b
                                             WHERE NOT b = ANY(satisfied) ORDER BY b) AS now_satisfied,
                          cardinality(satisfied) AS before
                   FROM locked)
               UPDATE traversal_nodes tn SET satisfied = a.now_satisfied
               FROM added a
               WHERE tn.traversal_id = a.traversal_id AND tn.node = a.node
                 AND cardinality(a.now_satisfied) > a.before
               RETURNING tn.traversal_id, tn.node,
                         cardinality(a.now_satisfied) = tn.requires_count AS ready""",
            [e[0] for e in entries],
            [e[1] for e in entries],
            [e[2] for e in entries],
        )
        return sorted((r["traversal_id"], r["node"]) for r in rows if r["ready"])

    async def finish_node(self, traversal: TraversalId, node: Node) -> FinishedNode | None:
        """Mark `node` done; None if it was done already (a duplicate report).

        Callers report the dependents next (`satisfy`) and count the traversal's
        sinks down last (`count_down`), so row locks are always taken in the order
        node -> dependents -> traversal -> stack.
        """
        if self._reads is not None:
            self._reads.nodes.pop((traversal, node), None)
        r = await self._raw.fetchrow(
            """UPDATE traversal_nodes SET done = true
               WHERE traversal_id = $1 AND node = $2 AND NOT done RETURNING direct, synced""",
            traversal,
            node,
        )
        if r is None:
            return None
        return FinishedNode(tuple(r["direct"]), tuple(r["synced"]))

    async def count_down(self, traversal: TraversalId, sinks: int = 1) -> int:
        """`sinks` more sinks of `traversal` are done; the number still to do (0: the
        traversal is over). Only sinks are counted, so this row is locked only by
        the completions that may end the traversal (`start_traversal`)."""
        remaining: int = await self._c.fetchval(
            "UPDATE traversals SET remaining = remaining - $2 WHERE traversal_id = $1 RETURNING remaining",
            traversal,
            sinks,
        )
        return remaining

    async def unfinished_nodes(self, traversal: TraversalId, *, limit: int = 20) -> list[Node]:
        rows = await self._c.fetch(
            "SELECT node FROM traversal_nodes WHERE traversal_id = $1 AND NOT done ORDER BY node LIMIT $2",
            traversal,
            limit,
        )
        return [r["node"] for r in rows]
