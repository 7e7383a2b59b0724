"""The graph of one traversal, computed once when an operation starts.

Nodes: a forward (update) node for the current row of every resource in the
new template, and a cleanup node for every existing row. Edges:
- forward: a resource's node requires the forward nodes of what the
  template says it requires;
- cleanup, reversed: a row's cleanup waits for the cleanup of every row that
  (by the dependencies *stored on the rows*) required it, so dependents are
  deleted first whatever the new template says (a row whose job is still
  running counts what that job was started with as well: a resource being
  created needs what it was created from until it is gone);
- a row replaced by another is cleaned up after its replacement's cleanup
  node, i.e. after the dependents moved to the replacement;
- a row that is in the new template is cleaned up after its forward node.
Leaves (nodes requiring nothing) are triggered first.

A kept row's cleanup finishes early: once its forward node is done and the
row is still the resource's (not replaced), its cleanup has nothing to do
and nothing to wait for, so it is finished with its forward node
(`kept_cleanups`) instead of at the end of a backward wave of no-op cleanups
through every layer. Its dependents' cleanups then no longer wait on what
waited on it, so the traversal's end is counted on more than its sinks
(`counted_nodes`).

A graph is stored as what each node's row needs (`stored_nodes`: how many
predecessors it waits for, the dependents it triggers directly and those that
are sync points, whether it is counted). A new traversal whose graph differs
from its predecessor's in few nodes stores only those (`carry_over`); the rest
are read from the predecessor's rows (`store/graph.py`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from services.engine.core.model import (
    GraphNode,
    Node,
    ResourceId,
    ResourceRow,
    RowLinks,
    TraversalId,
    cleanup,
    forward,
    is_forward,
    resource_of,
)


def traversal_graph(
    *,
    template_requires: Mapping[str, frozenset[str]],
    current_rows: Mapping[str, ResourceId],
    existing: Iterable[ResourceRow] | Iterable[RowLinks],
) -> dict[Node, GraphNode]:
    """Nodes keyed by id. `current_rows` maps every template resource to its row."""
    requires: dict[Node, set[Node]] = defaultdict(set)
    nodes: set[Node] = set()
    for name, names_needed in template_requires.items():
        node = forward(current_rows[name])
        nodes.add(node)
        requires[node].update(forward(current_rows[n]) for n in names_needed)
    rows = {row.resource_id: row for row in existing}
    for row in rows.values():
        mine = cleanup(row.resource_id)
        nodes.add(mine)
        for required_id in row.requires | (row.job_requires or frozenset()):
            if required_id in rows:
                requires[cleanup(required_id)].add(mine)
        if row.replaces is not None and row.replaces in rows:
            requires[cleanup(row.replaces)].add(mine)
        if forward(row.resource_id) in nodes:
            requires[mine].add(forward(row.resource_id))
    return _linked({node: requires.get(node, set()) for node in nodes})


def action_graph(rows: Iterable[ResourceRow], *, reverse: bool) -> dict[Node, GraphNode]:
    """The graph of a stack action (check, suspend, resume) over the current `rows`:
    a forward node each, ordered by the dependencies stored on the rows; `reverse`
    (suspend) acts on dependents first."""
    rows = list(rows)
    ids = {row.resource_id for row in rows}
    requires: dict[Node, set[Node]] = {forward(i): set() for i in ids}
    for row in rows:
        for required_id in row.requires & ids:
            before, after = forward(required_id), forward(row.resource_id)
            if reverse:
                before, after = after, before
            requires[after].add(before)
    return _linked(requires)


def _linked(requires: Mapping[Node, set[Node]]) -> dict[Node, GraphNode]:
    """Graph nodes from each node's prerequisites (every node is a key)."""
    dependents: dict[Node, set[Node]] = defaultdict(set)
    for node, prerequisites in requires.items():
        for prerequisite in prerequisites:
            dependents[prerequisite].add(node)
    return {
        node: GraphNode(node, frozenset(prerequisites), frozenset(dependents.get(node, ())))
        for node, prerequisites in requires.items()
    }


def leaves(graph: Mapping[Node, GraphNode]) -> list[Node]:
    return sorted(node for node, g in graph.items() if not g.requires)


def counted_nodes(graph: Mapping[Node, GraphNode]) -> frozenset[Node]:
    """The nodes a traversal counts down: it is over once they are all done.

    A node's completion implies its predecessors' (it is checked only once they are
    done), so counting the sinks would be enough, but for the cleanups of rows with
    a forward node: such a cleanup may finish with its forward node alone, before
    its other predecessors (`kept_cleanups`). So the count is of the sinks, those
    cleanups, and every cleanup with one of those among its dependents (which then
    does not wait for it). Every other node has a dependent whose completion implies
    its own, and so on down to a counted node. A create or a delete (no row with
    both nodes) counts its sinks alone."""
    early = {cleanup(resource_of(n)) for n in graph if is_forward(n)} & graph.keys()
    return frozenset(
        node
        for node, n in graph.items()
        if not n.dependents or node in early or (not is_forward(node) and not early.isdisjoint(n.dependents))
    )


@dataclass(frozen=True)
class StoredNode:
    """What a node's stored row holds of the graph (its state, done or not, aside)."""

    requires_count: int
    direct: tuple[Node, ...]  # dependents it alone holds back: triggered at once
    synced: tuple[Node, ...]  # dependents waiting on others too: sync points
    counted: bool = False  # counted down by the traversal (`counted_nodes`)


def stored_nodes(graph: Mapping[Node, GraphNode]) -> dict[Node, StoredNode]:
    """Each node of `graph` as its row stores it."""
    counted = counted_nodes(graph)

    def stored(n: GraphNode) -> StoredNode:
        direct = tuple(sorted(d for d in n.dependents if len(graph[d].requires) == 1))
        synced = tuple(sorted(d for d in n.dependents if len(graph[d].requires) > 1))
        return StoredNode(len(n.requires), direct, synced, n.node in counted)

    return {node: stored(n) for node, n in graph.items()}


@dataclass(frozen=True)
class CarriedOver:
    """A graph stored as the differences from a base graph's rows."""

    own: dict[Node, StoredNode]  # nodes new or different: rows of their own
    gone: tuple[Node, ...]  # nodes of the base the new graph does not have


def carry_over(
    new: Mapping[Node, StoredNode], base: Mapping[Node, StoredNode], *, most: float = 0.5
) -> CarriedOver | None:
    """`new` as differences from `base`; None when more than `most` of it would differ
    (then it is cheaper, and leaves nothing to look through, to store it whole)."""
    own = {node: s for node, s in new.items() if base.get(node) != s}
    gone = tuple(sorted(node for node in base if node not in new))
    if len(own) + len(gone) > most * len(new):
        return None
    return CarriedOver(own, gone)


@dataclass(frozen=True)
class FinishedNode:
    """What a node's row says once it is marked done: the dependents it triggers."""

    direct: tuple[Node, ...]  # dependents to trigger now
    synced: tuple[Node, ...]  # dependents that are sync points
    counted: bool = False  # counted down (`counted_nodes`; a sink always is)


Key = tuple[TraversalId, Node]


def kept_cleanups(finished: Mapping[Key, FinishedNode]) -> list[Key]:
    """The cleanup nodes that may finish with the forward nodes `finished`: each one's
    own row's cleanup, where it is a sync point (one waiting on that forward node
    alone is checked at once anyway). The caller finishes those whose row the cleanup
    would keep (`core.decide.decide_cleanup`), and only if counted (`counted_nodes`)."""
    return sorted(
        (traversal, cleanup(resource_of(node)))
        for (traversal, node), done in finished.items()
        if is_forward(node) and cleanup(resource_of(node)) in done.synced
    )


@dataclass(frozen=True)
class Triggered:
    """What nodes finished together trigger."""

    checks: tuple[tuple[TraversalId, Node], ...]  # dependents waiting on nothing else: checked now
    reports: tuple[tuple[TraversalId, Node, Node], ...]  # (traversal, sync point, finished node)
    counted: Counter[TraversalId]  # counted nodes finished (`counted_nodes`), by traversal


def triggered(finished: Mapping[tuple[TraversalId, Node], FinishedNode]) -> Triggered:
    """The dependents to check at once, the reports to sync points and the counted nodes,
    of the nodes `finished` (each made done once: a duplicate is left out before). A
    sync point finished among them is not reported to: it is done already."""
    checks: list[tuple[TraversalId, Node]] = []
    reports: list[tuple[TraversalId, Node, Node]] = []
    counted: Counter[TraversalId] = Counter()
    for (traversal, node), done in finished.items():
        checks.extend((traversal, dependent) for dependent in done.direct)
        reports.extend((traversal, d, node) for d in done.synced if (traversal, d) not in finished)
        if done.counted or (not done.direct and not done.synced):
            counted[traversal] += 1
    return Triggered(tuple(checks), tuple(reports), counted)
