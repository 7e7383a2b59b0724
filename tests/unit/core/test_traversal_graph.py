"""The traversal graph: forward edges from the template, cleanup edges from stored rows. Pure."""

from __future__ import annotations

import dataclasses
import uuid

from services.engine.core.graph import (
    FinishedNode,
    action_graph,
    carry_over,
    leaves,
    stored_nodes,
    traversal_graph,
    triggered,
)
from services.engine.core.model import (
    Action,
    Node,
    ResourceId,
    ResourceRow,
    StackId,
    Status,
    TraversalId,
    cleanup,
    forward,
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
    assert then.sinks == {t1: 1, t2: 2}
