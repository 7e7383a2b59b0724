"""The traversal graph: forward edges from the template, cleanup edges from stored rows. Pure."""

from __future__ import annotations

import dataclasses
import random
import uuid

from services.engine.core.graph import (
    FinishedNode,
    action_graph,
    carry_over,
    counted_nodes,
    kept_cleanups,
    leaves,
    stored_nodes,
    traversal_graph,
    triggered,
)
from services.engine.core.model import (
    Action,
    GraphNode,
    Node,
    ResourceId,
    ResourceRow,
    StackId,
    Status,
    TraversalId,
    cleanup,
    forward,
    is_forward,
    resource_of,
)

STACK = StackId(uuid.uuid4())


def row(rid: int, name: str, *, requires: tuple[int, ...] = (), replaces: int | None = None) -> ResourceRow:
    return ResourceRow(
        ResourceId(rid),
        STACK,
        name,
        "T",
        f"p{rid}",
        Action.CREATE,
        Status.COMPLETE,
        requires=frozenset(ResourceId(r) for r in requires),
        replaces=ResourceId(replaces) if replaces is not None else None,
    )


def test_create_has_forward_nodes_in_template_order_and_no_cleanup_of_new_rows() -> None:
    graph = traversal_graph(
        template_requires={"a": frozenset(), "b": frozenset({"a"})},
        current_rows={"a": ResourceId(1), "b": ResourceId(2)},
        existing=[],
    )
    assert set(graph) == {forward(1), forward(2)}
    assert graph[forward(2)].requires == {forward(1)}
    assert leaves(graph) == [forward(1)]


def test_cleanup_follows_stored_dependencies_reversed_not_the_new_template() -> None:
    # Stored: y (2) required x (1). New template inverts it: x requires y.
    existing = [row(1, "x"), row(2, "y", requires=(1,))]
    graph = traversal_graph(
        template_requires={"x": frozenset({"y"}), "y": frozenset()},
        current_rows={"x": ResourceId(1), "y": ResourceId(2)},
        existing=existing,
    )
    assert cleanup(2) in graph[cleanup(1)].requires, "x's row is cleaned after y's, as stored"
    assert forward(1) in graph[cleanup(1)].requires, "a row is cleaned after its own update"
    assert forward(2) in graph[forward(1)].requires, "forward edges follow the new template"


def test_a_row_whose_create_is_still_running_is_cleaned_before_what_its_job_requires() -> None:
    # A condition (2) still being created from its handle (1); neither is in the new template.
    waiting = dataclasses.replace(
        row(2, "wait"), status=Status.IN_PROGRESS, job_requires=frozenset({ResourceId(1)})
    )
    graph = traversal_graph(template_requires={}, current_rows={}, existing=[row(1, "handle"), waiting])
    assert graph[cleanup(1)].requires == {cleanup(2)}, "the handle goes only after the condition"


def test_a_replaced_row_is_cleaned_after_its_replacement_and_removed_rows_have_only_cleanup() -> None:
    existing = [row(1, "a"), row(3, "a", replaces=1), row(2, "gone", requires=(1,))]
    graph = traversal_graph(
        template_requires={"a": frozenset()}, current_rows={"a": ResourceId(3)}, existing=existing
    )
    assert cleanup(3) in graph[cleanup(1)].requires
    assert cleanup(2) in graph[cleanup(1)].requires
    assert forward(2) not in graph
    assert set(leaves(graph)) == {forward(3), cleanup(2)}


def test_delete_is_cleanup_only() -> None:
    existing = [row(1, "a"), row(2, "b", requires=(1,))]
    graph = traversal_graph(template_requires={}, current_rows={}, existing=existing)
    assert set(graph) == {cleanup(1), cleanup(2)}
    assert graph[cleanup(2)].dependents == {cleanup(1)}
    assert leaves(graph) == [cleanup(2)]


def test_a_stack_action_visits_dependencies_first_and_suspend_visits_dependents_first() -> None:
    rows = [row(1, "db"), row(2, "app", requires=(1,)), row(3, "web", requires=(2, 9))]  # 9: gone
    check = action_graph(rows, reverse=False)
    assert leaves(check) == [forward(1)]
    assert check[forward(3)].requires == {forward(2)}
    suspend = action_graph(rows, reverse=True)
    assert leaves(suspend) == [forward(3)]
    assert suspend[forward(1)].requires == {forward(2)}
    assert suspend[forward(3)].dependents == {forward(2)}


def test_a_node_stores_its_dependents_split_into_direct_ones_and_sync_points() -> None:
    graph = traversal_graph(
        template_requires={"a": frozenset(), "b": frozenset({"a"}), "c": frozenset({"a", "b"})},
        current_rows={"a": ResourceId(1), "b": ResourceId(2), "c": ResourceId(3)},
        existing=[],
    )
    stored = stored_nodes(graph)
    a, b, c = forward(ResourceId(1)), forward(ResourceId(2)), forward(ResourceId(3))
    assert (stored[a].requires_count, stored[a].direct, stored[a].synced) == (0, (b,), (c,))
    assert (stored[b].requires_count, stored[b].direct, stored[b].synced) == (1, (), (c,))
    assert (stored[c].requires_count, stored[c].direct, stored[c].synced) == (2, (), ())


def test_an_update_carries_over_the_nodes_whose_rows_would_not_change_and_drops_those_gone() -> None:
    names = {f"r{i}": ResourceId(i + 1) for i in range(10)}
    chain = {f"r{i}": frozenset({f"r{i - 1}"}) if i else frozenset() for i in range(10)}
    before = stored_nodes(traversal_graph(template_requires=chain, current_rows=names, existing=[]))
    rows = [row(i + 1, f"r{i}", requires=(i,) if i else ()) for i in range(10)]
    first_update = stored_nodes(traversal_graph(template_requires=chain, current_rows=names, existing=rows))
    assert carry_over(first_update, before) is None  # every node has a cleanup dependent now: stored whole

    # The next update of the same rows: nothing differs, nothing is written.
    again = carry_over(first_update, first_update)
    assert again is not None
    assert again.own == {}
    assert again.gone == ()

    # The last resource removed from the template: its forward node is gone, and the
    # nodes next to it store what changed around them.
    shorter = {n: r for n, r in chain.items() if n != "r9"}
    names_left = {n: i for n, i in names.items() if n != "r9"}
    update = stored_nodes(traversal_graph(template_requires=shorter, current_rows=names_left, existing=rows))
    carried = carry_over(update, first_update)
    assert carried is not None
    assert carried.gone == (forward(ResourceId(10)),)
    assert set(carried.own) == {forward(ResourceId(9)), cleanup(ResourceId(10))}
    assert all(update[n] == first_update[n] for n in update if n not in carried.own)


def test_a_graph_mostly_different_from_its_base_is_stored_whole() -> None:
    a = stored_nodes(action_graph([row(1, "a"), row(2, "b", requires=(1,))], reverse=False))
    b = stored_nodes(action_graph([row(1, "a"), row(2, "b", requires=(1,))], reverse=True))
    assert carry_over(b, a) is None
    assert carry_over(b, a, most=1.0) is not None


def test_finished_nodes_trigger_their_direct_dependents_report_to_sync_points_and_count_sinks() -> None:
    t1, t2 = TraversalId(uuid.UUID(int=1)), TraversalId(uuid.UUID(int=2))
    a, b, c, sync, sink = (Node(n) for n in (1, 2, 3, 4, 5))
    then = triggered(
        {
            (t1, a): FinishedNode(direct=(b,), synced=(sync,)),
            (t1, c): FinishedNode(direct=(), synced=(sync,)),
            (t1, sink): FinishedNode(direct=(), synced=()),
            (t2, sink): FinishedNode(direct=(), synced=()),
            (t2, a): FinishedNode(direct=(), synced=()),
        }
    )
    assert then.checks == ((t1, b),)
    assert then.reports == ((t1, sync, a), (t1, sync, c))
    assert then.counted == {t1: 1, t2: 2}


def test_a_create_or_a_delete_counts_its_sinks_alone() -> None:
    create = traversal_graph(
        template_requires={"a": frozenset(), "b": frozenset({"a"})},
        current_rows={"a": ResourceId(1), "b": ResourceId(2)},
        existing=[],
    )
    assert counted_nodes(create) == {forward(2)}
    delete = traversal_graph(
        template_requires={}, current_rows={}, existing=[row(1, "a"), row(2, "b", requires=(1,))]
    )
    assert counted_nodes(delete) == {cleanup(1)}


def test_an_update_counts_kept_rows_cleanups_and_the_cleanups_they_no_longer_wait_for() -> None:
    # a <- b <- c stored; the new template drops b (c now requires a).
    existing = [row(1, "a"), row(2, "b", requires=(1,)), row(3, "c", requires=(2,))]
    graph = traversal_graph(
        template_requires={"a": frozenset(), "c": frozenset({"a"})},
        current_rows={"a": ResourceId(1), "c": ResourceId(3)},
        existing=existing,
    )
    # a's and c's cleanups may finish with their forward nodes; b's cleanup (deleting b)
    # is waited for by a's alone, which may not wait: it is counted itself.
    assert counted_nodes(graph) == {cleanup(1), cleanup(2), cleanup(3)}
    stored = stored_nodes(graph)
    assert [n for n, s in stored.items() if s.counted] == sorted(counted_nodes(graph))


def random_update(rnd: random.Random) -> dict[Node, GraphNode]:
    """The graph of an update over random stored rows (some replaced by an earlier
    update) to a random template (some rows left out, some resources new)."""
    existing: list[ResourceRow] = []
    names = [f"r{i}" for i in range(rnd.randint(1, 8))]
    for i, name in enumerate(names, start=1):
        existing.append(row(i, name, requires=tuple(j for j in range(1, i) if rnd.random() < 0.4)))
    current = {name: ResourceId(i) for i, name in enumerate(names, start=1)}
    for name in names:
        if rnd.random() < 0.2:  # a newer row of the same name
            new_id = ResourceId(len(existing) + 1)
            existing.append(row(new_id, name, replaces=current[name]))
            current[name] = new_id
    kept = [n for n in names if rnd.random() < 0.7] + [f"new{i}" for i in range(rnd.randint(0, 3))]
    for name in kept:
        current.setdefault(name, ResourceId(len(existing) + 100 + len(current)))
    template = {n: frozenset(m for m in kept[:k] if rnd.random() < 0.4) for k, n in enumerate(kept)}
    return traversal_graph(
        template_requires=template, current_rows={n: current[n] for n in kept}, existing=existing
    )


def test_the_counted_nodes_are_done_only_once_every_node_is_whatever_cleanups_finish_early() -> None:
    # Nodes finish in a random order, the cleanup of a row kept (one with a forward
    # node, not replaced) maybe as soon as that forward node is done. Whenever every
    # counted node is done, every node is.
    for seed in range(300):
        rnd = random.Random(seed)
        graph = random_update(rnd)
        counted = counted_nodes(graph)
        with_forward = {cleanup(resource_of(n)) for n in graph if is_forward(n)} & graph.keys()
        early = {n for n in sorted(with_forward) if rnd.random() < 0.7}
        done: set[Node] = set()
        while len(done) < len(graph):
            ready = [
                n
                for n, g in graph.items()
                if n not in done and (g.requires <= done or (n in early and forward(resource_of(n)) in done))
            ]
            assert ready, f"seed {seed}: nothing can finish"
            done.add(rnd.choice(ready))
            left = set(graph) - done
            assert not counted <= done or not left, f"seed {seed}: ended with {left} to do"


def test_a_forward_node_finished_names_its_rows_cleanup_when_that_waits_on_others_too() -> None:
    t = TraversalId(uuid.UUID(int=1))
    then = kept_cleanups(
        {
            (t, forward(1)): FinishedNode(direct=(forward(2),), synced=(cleanup(1),)),
            (t, forward(3)): FinishedNode(direct=(cleanup(3),), synced=()),  # checked at once anyway
            (t, cleanup(4)): FinishedNode(direct=(), synced=(cleanup(5),)),
        }
    )
    assert then == [(t, cleanup(1))]


def test_a_counted_node_counts_though_it_has_dependents_and_a_sync_point_done_with_it_gets_no_report() -> (
    None
):
    t = TraversalId(uuid.UUID(int=1))
    then = triggered(
        {
            (t, forward(1)): FinishedNode(direct=(), synced=(cleanup(1),)),
            (t, cleanup(1)): FinishedNode(direct=(), synced=(cleanup(2),), counted=True),
            (t, forward(3)): FinishedNode(direct=(), synced=(cleanup(2),)),
        }
    )
    assert then.reports == ((t, cleanup(2), cleanup(1)), (t, cleanup(2), forward(3)))
    assert then.counted == {t: 1}
