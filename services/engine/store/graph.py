"""Statements of a traversal's graph (mixed into `Tx`): its nodes, sync points and end count.

Where it sits: `services.engine.traversal` stores the graph of a new
traversal (`start_traversal`: a row per node, naming the dependents to
trigger directly and the sync points to report to); a check reads its node
(`node`) and, once the node's outcome is known, marks it done (`finishing`).
When the transaction settles, the rows of the nodes it finished are written
done together (`finish_nodes`), the sync points that wait on them are
reported to (`satisfy`) and the traversal's counted nodes counted down
(`count_down`: on one of its count's shards, `core.end_count`), in that
order, so row locks are always taken node -> dependents -> count shards ->
traversal -> stack.

A graph that differs from the one of the traversal it preempts in few nodes
is stored as those nodes only (`core.graph.carry_over`): the traversal names
a `base` whose rows stand for the rest, read as not done and with nothing
satisfied; such a node gets a row of its own the first time its state
changes (`finish_nodes`, `satisfy`). A node of the base the new graph does not
have gets a row of its own, done. So an update that leaves most of the graph
as it was writes few rows (preemption in milliseconds, issue 18 item 5).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping

from services.engine.collector import COLLECTOR
from services.engine.core.end_count import shard_counts, take
from services.engine.core.graph import FinishedNode, StoredNode, carry_over, stored_nodes
from services.engine.core.model import GraphNode, Node, StackId, TraversalId
from services.engine.store.driver import Conn
from services.engine.store.prefetch import NodeState, Prefetched
from shared.errors import ConflictError, PermanentError

#: The nodes of `traversal`: its own rows first, then those of its base it has none of.
#: Parameters: $1 the traversal; the caller adds the node condition (`own.` / `b.` columns).
OWN_OR_BASE_NODES = """
    SELECT 0 AS rank, own.node, own.requires_count, own.direct, own.synced, own.counted, own.done
    FROM traversal_nodes own WHERE own.traversal_id = {t} {own_node}
    UNION ALL
    SELECT 1, b.node, b.requires_count, b.direct, b.synced, b.counted, false
    FROM traversals tr JOIN traversal_nodes b ON b.traversal_id = tr.base {base_node}
    WHERE tr.traversal_id = {t}"""

#: Structures of base traversals by id, read or written by this process (a base's
#: structure never changes once stored), at most this many nodes in all.
_BASES: OrderedDict[TraversalId, dict[Node, StoredNode]] = OrderedDict()
BASE_NODES_KEPT = 100_000


def _remember(traversal: TraversalId, nodes: dict[Node, StoredNode]) -> None:
    if len(nodes) > BASE_NODES_KEPT:
        return
    _BASES[traversal] = nodes
    while sum(len(n) for n in _BASES.values()) > BASE_NODES_KEPT:
        _BASES.popitem(last=False)


class GraphStatements:
    _c: Conn  # the transaction's connection (`Tx`; `Watched` while prefetched rows are served)
    _raw: Conn  # the connection itself: writes that forget exactly their own row
    _reads: Prefetched | None
    _finishing: set[tuple[TraversalId, Node]]  # done in this transaction, written later

    async def start_traversal(
        self,
        stack_id: StackId,
        traversal: TraversalId,
        graph: Mapping[Node, GraphNode],
        *,
        previous: TraversalId | None = None,
    ) -> None:
        """Store the graph of `traversal`; only the nodes that differ from the graph of
        `previous` (the traversal it preempts) when few do; a traversal reserved
        (`reserve_traversal`) gets its graph now. Older traversals of the
        stack are left alone (checks of them may still be committing) and pruned
        later, a base once no traversal names it.

        The traversal counts down its counted nodes (`core.graph.counted_nodes`: its
        sinks, and in an update the cleanups of rows it keeps), not every node: a
        node is checked only once all it requires is done, so the traversal is over
        exactly when its last counted node is; the other nodes' completions never
        touch the traversal's row (`count_down`)."""
        base = await self._base_of(previous) if previous is not None and graph else None
        with COLLECTOR.paused():  # a row or two per resource, all kept: no full collections meanwhile
            nodes = stored_nodes(graph)
            carried = carry_over(nodes, base[1]) if base is not None else None
            own, gone = (nodes, ()) if carried is None else (carried.own, carried.gone)
            records = [
                *(
                    (traversal, n, s.requires_count, s.direct, s.synced, s.counted, False)
                    for n, s in own.items()
                ),
                *((traversal, n, 0, (), (), False, True) for n in gone),  # not in this graph
            ]
        shards = shard_counts(sum(1 for n in nodes.values() if n.counted))
        stored = await self._c.fetchval(
            """INSERT INTO traversals (traversal_id, stack_id, remaining, base, sharded)
               VALUES ($1, $2, $3, $4, true)
               ON CONFLICT (traversal_id) DO UPDATE
                   SET remaining = excluded.remaining, base = excluded.base, sharded = true
               WHERE traversals.remaining IS NULL
               RETURNING traversal_id""",
            traversal,
            stack_id,
            len(shards),
            base[0] if base is not None and carried is not None else None,
        )
        if stored is None:
            raise ConflictError(f"the graph of traversal {traversal} is stored already")
        if carried is None:
            _remember(traversal, nodes)
        if shards:
            await self._c.copy_records_to_table(
                "traversal_counts",
                columns=["traversal_id", "shard", "remaining"],
                records=[(traversal, shard, count) for shard, count in enumerate(shards)],
            )
        if records:
            await self._c.copy_records_to_table(
                "traversal_nodes",
                columns=["traversal_id", "node", "requires_count", "direct", "synced", "counted", "done"],
                records=records,
            )

    async def reserve_traversal(self, stack_id: StackId, traversal: TraversalId) -> None:
        """The row of a traversal made the stack's before its graph is stored
        (`start_traversal` stores it; `graph_pending` says it has not yet)."""
        await self._c.execute(
            "INSERT INTO traversals (traversal_id, stack_id, remaining) VALUES ($1, $2, NULL)",
            traversal,
            stack_id,
        )

    async def newest_graph(self, stack_id: StackId) -> TraversalId | None:
        """The stack's newest traversal whose graph is stored."""
        found = await self._c.fetchval(
            """SELECT traversal_id FROM traversals WHERE stack_id = $1 AND remaining IS NOT NULL
               ORDER BY created_at DESC LIMIT 1""",
            stack_id,
        )
        return TraversalId(found) if found is not None else None

    async def graph_pending(self, traversal: TraversalId) -> bool:
        """Whether `traversal` was reserved and its graph is not stored yet."""
        pending = await self._c.fetchval(
            "SELECT remaining IS NULL FROM traversals WHERE traversal_id = $1", traversal
        )
        return bool(pending)

    async def _base_of(self, previous: TraversalId) -> tuple[TraversalId, dict[Node, StoredNode]] | None:
        """The traversal whose rows hold the whole graph of `previous` (itself, or its
        base), and that graph's structure; None if `previous` is gone or has no graph
        (reserved, never stored: `reserve_traversal`)."""
        root: TraversalId | None = await self._c.fetchval(
            """SELECT coalesce(base, traversal_id) FROM traversals
               WHERE traversal_id = $1 AND remaining IS NOT NULL""",
            previous,
        )
        if root is None:
            return None
        nodes = _BASES.get(root)
        if nodes is None:
            rows = await self._c.fetch(
                """SELECT node, requires_count, direct, synced, counted FROM traversal_nodes
                   WHERE traversal_id = $1""",
                root,
            )
            nodes = {
                r["node"]: StoredNode(
                    r["requires_count"], tuple(r["direct"]), tuple(r["synced"]), r["counted"]
                )
                for r in rows
            }
            _remember(root, nodes)
        else:
            _BASES.move_to_end(root)
        return root, nodes

    async def node(self, traversal: TraversalId, node: Node) -> NodeState | None:
        """The node's state; done if this transaction finished it (`finishing`)."""
        state = await self._node(traversal, node)
        if state is not None and (traversal, node) in self._finishing:
            return NodeState(state.requires_count, True)
        return state

    async def _node(self, traversal: TraversalId, node: Node) -> NodeState | None:
        if self._reads is not None and (traversal, node) in self._reads.nodes:
            return self._reads.nodes[(traversal, node)]
        nodes = OWN_OR_BASE_NODES.format(t="$1", own_node="AND own.node = $2", base_node="AND b.node = $2")
        r = await self._c.fetchrow(
            f"SELECT requires_count, done FROM ({nodes}) n ORDER BY rank LIMIT 1", traversal, node
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
        become ready. A predecessor reported again changes nothing, nor does a report
        to a node done already (a kept row's cleanup finished early: `core.graph`).
        """
        entries = sorted(set(reports))
        if not entries:
            return []
        nodes = OWN_OR_BASE_NODES.format(t="r.t", own_node="AND own.node = r.n", base_node="AND b.node = r.n")
        # A node carried over from the base has no row yet: the first report writes
        # it (INSERT); a row already there is locked and added to (ON CONFLICT). The
        # rows are taken in (traversal, node) order either way.
        rows = await self._raw.fetch(  # `satisfied` is not prefetched: nothing to forget
            f"""WITH reported AS (
                   SELECT t, n, array_agg(DISTINCT b ORDER BY b) AS bys
                   FROM unnest($1::uuid[], $2::bigint[], $3::bigint[]) AS r(t, n, b) GROUP BY t, n),
               found AS (
                   SELECT r.t, r.n, r.bys, x.requires_count, x.direct, x.synced, x.counted
                   FROM reported r CROSS JOIN LATERAL (
                       SELECT * FROM ({nodes}) n ORDER BY rank LIMIT 1) x
                   ORDER BY r.t, r.n)
               INSERT INTO traversal_nodes AS tn
                   (traversal_id, node, requires_count, direct, synced, counted, satisfied)
               SELECT t, n, requires_count, direct, synced, counted, bys FROM found ORDER BY t, n
               ON CONFLICT (traversal_id, node) DO UPDATE
                   SET satisfied = tn.satisfied || ARRAY(
                       SELECT b FROM unnest(excluded.satisfied) AS b
                       WHERE NOT b = ANY(tn.satisfied) ORDER BY b)
                   WHERE NOT tn.done AND EXISTS (
                       SELECT 1 FROM unnest(excluded.satisfied) AS b WHERE NOT b = ANY(tn.satisfied))
               RETURNING tn.traversal_id, tn.node, cardinality(tn.satisfied) = tn.requires_count AS ready""",
            [e[0] for e in entries],
            [e[1] for e in entries],
            [e[2] for e in entries],
        )
        return sorted((r["traversal_id"], r["node"]) for r in rows if r["ready"])

    def finishing(self, traversal: TraversalId, node: Node) -> None:
        """`node` is done in this transaction: from now on `node` reads it done, though
        its row is written later, with the others', by `finish_nodes`."""
        self._finishing.add((traversal, node))

    async def finish_nodes(
        self, keys: Iterable[tuple[TraversalId, Node]], *, counted_only: bool = False
    ) -> dict[tuple[TraversalId, Node], FinishedNode]:
        """Mark each (traversal, node) of `keys` done, in one statement; what each node
        this made done triggers, in (traversal, node) order (a node done already, a
        duplicate report, is left out). `counted_only`: only the nodes of `keys` that
        are counted (kept rows' cleanups finished early: a traversal stored before
        nodes were counted has none, and finishes its cleanups in order).

        The rows are locked in (traversal, node) order, as `satisfy` locks its own, so
        batches of two engines never deadlock on them. Callers report the dependents
        next (`satisfy`) and count the traversal down last (`count_down`), so row locks
        are always taken in the order node -> dependents -> count shards -> traversal -> stack.
        """
        entries = sorted(set(keys))
        if not entries:
            return {}
        if self._reads is not None:
            for key in entries:
                self._reads.nodes.pop(key, None)
        nodes = OWN_OR_BASE_NODES.format(t="k.t", own_node="AND own.node = k.n", base_node="AND b.node = k.n")
        # A node carried over from the base has no row yet: it gets its own, done
        # (INSERT); a row already there is locked and marked done (ON CONFLICT).
        rows = await self._raw.fetch(  # `done` of the nodes named is forgotten above
            f"""WITH found AS (
                   SELECT k.t, k.n, x.requires_count, x.direct, x.synced, x.counted
                   FROM unnest($1::uuid[], $2::bigint[]) AS k(t, n) CROSS JOIN LATERAL (
                       SELECT * FROM ({nodes}) n ORDER BY rank LIMIT 1) x
                   {"WHERE x.counted" if counted_only else ""})
               INSERT INTO traversal_nodes AS tn
                   (traversal_id, node, requires_count, direct, synced, counted, done)
               SELECT t, n, requires_count, direct, synced, counted, true FROM found ORDER BY t, n
               ON CONFLICT (traversal_id, node) DO UPDATE SET done = true WHERE NOT tn.done
               RETURNING tn.traversal_id, tn.node, tn.direct, tn.synced, tn.counted""",
            [e[0] for e in entries],
            [e[1] for e in entries],
        )
        finished = {
            (r["traversal_id"], r["node"]): FinishedNode(tuple(r["direct"]), tuple(r["synced"]), r["counted"])
            for r in rows
        }
        return {key: finished[key] for key in entries if key in finished}

    async def count_down(self, traversal: TraversalId, nodes: int = 1) -> bool:
        """`nodes` more counted nodes of `traversal` are done; True if that ends it (once).

        Only counted nodes are (`start_traversal`), from the fullest of the traversal's
        shards that no other transaction holds, if it has enough (`core.end_count`):
        one statement, waiting for no one. Failing that (the shards are low, near the
        end, or held), every shard left is locked in order and taken from. A shard
        brought to zero counts down the traversal's row (its shards still open), so
        that row is locked once per shard. A traversal stored before shards counts
        its nodes on its row."""
        left: int | None = await self._c.fetchval(
            """WITH one AS (
                   SELECT shard FROM traversal_counts WHERE traversal_id = $1 AND remaining >= $2
                   ORDER BY remaining DESC, shard LIMIT 1 FOR UPDATE SKIP LOCKED)
               UPDATE traversal_counts c SET remaining = c.remaining - $2 FROM one
               WHERE c.traversal_id = $1 AND c.shard = one.shard RETURNING c.remaining""",
            traversal,
            nodes,
        )
        if left is not None:
            return left == 0 and await self._close_shards(traversal, 1)
        rows = await self._c.fetch(
            """SELECT shard, remaining FROM traversal_counts WHERE traversal_id = $1 AND remaining > 0
               ORDER BY shard FOR UPDATE""",
            traversal,
        )
        if not rows and not await self._c.fetchval(
            "SELECT sharded FROM traversals WHERE traversal_id = $1", traversal
        ):
            return await self._close_shards(traversal, nodes)  # its row counts nodes
        try:
            taken = take([(r["shard"], r["remaining"]) for r in rows], nodes)
        except ValueError as exc:  # nodes counted twice: a bug, which no retry mends
            raise PermanentError(f"traversal {traversal}: {exc}") from exc
        await self._c.execute(
            """WITH t AS (SELECT * FROM unnest($2::int[], $3::int[]) AS t(shard, amount))
               UPDATE traversal_counts c SET remaining = c.remaining - t.amount FROM t
               WHERE c.traversal_id = $1 AND c.shard = t.shard""",
            traversal,
            [shard for shard, _ in taken],
            [amount for _, amount in taken],
        )
        had = {r["shard"]: r["remaining"] for r in rows}
        zeroed = sum(1 for shard, amount in taken if had[shard] == amount)
        return zeroed > 0 and await self._close_shards(traversal, zeroed)

    async def _close_shards(self, traversal: TraversalId, shards: int) -> bool:
        """`shards` more of the traversal's shards are at zero; True if none is left."""
        remaining: int = await self._c.fetchval(
            "UPDATE traversals SET remaining = remaining - $2 WHERE traversal_id = $1 RETURNING remaining",
            traversal,
            shards,
        )
        return remaining == 0

    async def unfinished_nodes(self, traversal: TraversalId, *, limit: int = 20) -> list[Node]:
        nodes = OWN_OR_BASE_NODES.format(t="$1", own_node="", base_node="")
        rows = await self._c.fetch(
            f"""SELECT DISTINCT ON (node) node, done FROM ({nodes}) n ORDER BY node, rank""",
            traversal,
        )
        return [r["node"] for r in rows if not r["done"]][:limit]
