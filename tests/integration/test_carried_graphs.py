"""A traversal stores only the nodes of its graph that differ from the graph it preempts
(services/engine/store/graph.py, issue 18 item 5); the rest are read from its base's rows
as its own, not done, nothing satisfied, whatever state the base's run left them in.

Real: PostgreSQL (a fresh, migrated database). The graphs are `core.graph`'s, for a
stack of stored rows; the statements are the ones the convergence code runs. The last
test runs updates end to end (tests/support/convergence.py: the engine, worker and
observer in one process, deliveries reordered and duplicated).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from services.engine.core.graph import traversal_graph
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
)
from services.engine.store import Store
from tests.scenarios.library import assert_world_matches, hot, slow, thing
from tests.support.convergence import converge
from tests.support.databases import store_with_stack
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

STACK = StackId(uuid.uuid4())


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    async with store_with_stack(database_url, STACK, action="UPDATE", pool_size=2) as store:
        yield store


def row(rid: int, requires: tuple[int, ...]) -> ResourceRow:
    return ResourceRow(
        ResourceId(rid),
        STACK,
        f"r{rid}",
        "T",
        f"p{rid}",
        Action.CREATE,
        Status.COMPLETE,
        requires=frozenset(ResourceId(r) for r in requires),
    )


def fan_in(names: int, *, existing: bool = True) -> dict[Node, GraphNode]:
    """r1..r{names-1} each require nothing; the last requires all of them (a sync point)."""
    last = f"r{names}"
    requires = {f"r{i}": frozenset[str]() for i in range(1, names)} | {last: frozenset(requires_of(names))}
    rows = [row(i, ()) for i in range(1, names)] + [row(names, tuple(range(1, names)))]
    return traversal_graph(
        template_requires=requires,
        current_rows={f"r{i}": ResourceId(i) for i in range(1, names + 1)},
        existing=rows if existing else [],
    )


def requires_of(names: int) -> set[str]:
    return {f"r{i}" for i in range(1, names)}


async def own_rows(db: asyncpg.Connection, traversal: TraversalId) -> int:
    return int(await db.fetchval("SELECT count(*) FROM traversal_nodes WHERE traversal_id = $1", traversal))


async def test_an_update_with_the_same_graph_stores_no_node_and_reads_its_base_as_its_own(
    store: Store, db: asyncpg.Connection
) -> None:
    first, second = TraversalId(uuid.uuid4()), TraversalId(uuid.uuid4())
    graph = fan_in(6)
    async with store.transaction() as tx:
        await tx.start_traversal(STACK, first, graph)
    sink = forward(ResourceId(6))
    async with store.transaction() as tx:  # the first traversal's run gets somewhere
        for i in range(1, 4):
            assert await tx.finish_nodes([(first, forward(ResourceId(i)))]) != {}
        await tx.satisfy([(first, sink, forward(ResourceId(i))) for i in range(1, 4)])
    async with store.transaction() as tx:
        await tx.start_traversal(STACK, second, graph, previous=first)

    assert await db.fetchval("SELECT base FROM traversals WHERE traversal_id = $1", second) == first
    assert await own_rows(db, second) == 0
    assert await own_rows(db, first) == len(graph)
    async with store.transaction() as tx:
        state = await tx.node(second, forward(ResourceId(1)))  # done in the base: not here
        assert state is not None
        assert (state.requires_count, state.done) == (0, False)
        assert (await tx.node(second, sink)).requires_count == 5  # type: ignore[union-attr]
        assert await tx.node(second, Node(999_999)) is None
        pending = {p.node for p in await tx.pending_nodes(second)}
        assert pending == set(graph)
    async with store.transaction() as tx:
        await tx.prefetch(resources=[], stacks=[], nodes=[(second, forward(ResourceId(2))), (first, sink)])
        carried, base = await tx.node(second, forward(ResourceId(2))), await tx.node(first, sink)
        assert carried is not None
        assert not carried.done
        assert base is not None
        assert not base.done


async def test_carried_nodes_finish_once_and_their_sync_point_becomes_ready_once(
    store: Store, db: asyncpg.Connection
) -> None:
    first, second = TraversalId(uuid.uuid4()), TraversalId(uuid.uuid4())
    graph = fan_in(4, existing=False)  # forward nodes only: each leaf feeds the sink alone
    sink = forward(ResourceId(4))
    async with store.transaction() as tx:
        await tx.start_traversal(STACK, first, graph)
    async with store.transaction() as tx:  # in the base, the sink was even made ready
        for i in range(1, 4):
            await tx.finish_nodes([(first, forward(ResourceId(i)))])
        assert await tx.satisfy([(first, sink, forward(ResourceId(i))) for i in range(1, 4)]) == [
            (first, sink)
        ]
    async with store.transaction() as tx:
        await tx.start_traversal(STACK, second, graph, previous=first)

    async with store.transaction() as tx:
        finished = await tx.finish_nodes([(second, forward(ResourceId(1)))])
        assert finished[(second, forward(ResourceId(1)))].synced == (sink,)
        assert await tx.finish_nodes([(second, forward(ResourceId(1)))]) == {}  # a duplicate report
        assert await tx.satisfy([(second, sink, forward(ResourceId(1)))]) == []
    async with store.transaction() as tx:
        await tx.finish_nodes([(second, forward(ResourceId(2))), (second, forward(ResourceId(3)))])
        reports = [(second, sink, forward(ResourceId(i))) for i in (1, 2, 3)]  # 1 reported again
        assert await tx.satisfy(reports) == [(second, sink)]
        assert await tx.satisfy(reports) == []
        assert {p.node for p in await tx.pending_nodes(second)} == set(graph) - {
            forward(ResourceId(i)) for i in (1, 2, 3)
        }
    base_sink = await db.fetchrow(
        "SELECT satisfied, done FROM traversal_nodes WHERE traversal_id = $1 AND node = $2", first, sink
    )
    assert base_sink is not None
    assert (len(base_sink["satisfied"]), base_sink["done"]) == (3, False)  # the base's rows are untouched


async def test_only_the_nodes_that_differ_are_stored_and_a_node_the_update_drops_is_gone(
    store: Store, db: asyncpg.Connection
) -> None:
    first, second, third = (TraversalId(uuid.uuid4()) for _ in range(3))
    rows = [row(i, (i - 1,) if i > 1 else ()) for i in range(1, 11)]
    names = {f"r{i}": ResourceId(i) for i in range(1, 11)}
    chain = {f"r{i}": frozenset({f"r{i - 1}"}) if i > 1 else frozenset() for i in range(1, 11)}
    whole = traversal_graph(template_requires=chain, current_rows=names, existing=rows)
    async with store.transaction() as tx:
        await tx.start_traversal(STACK, first, whole)
    shorter = {n: r for n, r in chain.items() if n != "r10"}
    without = traversal_graph(
        template_requires=shorter, current_rows={n: names[n] for n in shorter}, existing=rows
    )
    async with store.transaction() as tx:
        await tx.start_traversal(STACK, second, without, previous=first)
    assert await own_rows(db, second) == 3  # r9's forward node, r10's cleanup; r10's forward node gone
    async with store.transaction() as tx:
        assert (await tx.node(second, forward(ResourceId(10)))).done  # type: ignore[union-attr]
        assert (await tx.node(second, cleanup(ResourceId(10)))).requires_count == 0  # type: ignore[union-attr]
        assert {p.node for p in await tx.pending_nodes(second)} == set(without)
        await tx.start_traversal(STACK, third, without, previous=second)
    # A traversal's base is always one that stores its whole graph: never a chain.
    assert await db.fetchval("SELECT base FROM traversals WHERE traversal_id = $1", third) == first
    assert await own_rows(db, third) == 3


async def test_pruning_keeps_a_base_while_a_traversal_names_it_and_deleting_the_stack_drops_both(
    store: Store, db: asyncpg.Connection
) -> None:
    first, second, third = (TraversalId(uuid.uuid4()) for _ in range(3))
    graph = fan_in(3)
    async with store.transaction() as tx:
        await tx.start_traversal(STACK, first, graph)
        await tx.start_traversal(STACK, second, graph, previous=first)
        await tx.start_traversal(STACK, third, graph, previous=second)
    await db.execute("UPDATE stacks SET current_traversal = $2 WHERE stack_id = $1", STACK, third)

    await store.prune(inbox_seconds=0, traversal_seconds=0)
    kept = {r["traversal_id"] for r in await db.fetch("SELECT traversal_id FROM traversals")}
    assert kept == {first, third}
    async with store.transaction() as tx:
        assert {p.node for p in await tx.pending_nodes(third)} == set(graph)

    await db.execute("DELETE FROM stacks WHERE stack_id = $1", STACK)  # a base goes with its stack
    assert await db.fetchval("SELECT count(*) FROM traversals") == 0


async def test_updates_preempting_updates_of_the_same_shape_carry_the_graph_over_and_end_in_the_last(
    database_url: str,
) -> None:
    def goal(value: str) -> dict[str, object]:
        return hot(
            {
                "s": slow(value),
                "t": thing(value={"get_attr": ["s", "output"]}),
                "u": thing(value={"list_join": ["-", [{"get_attr": ["t", "value"]}, "u"]]}),
                "v": thing(value=value),
            }
        )

    async with converge(database_url, seed=3) as cv:
        stack = await cv.create("s", goal("0"))
        assert (await cv.settled(stack))[:2] == ("CREATE", "COMPLETE")
        for value in ("1", "2", "3"):  # each preempts the one before, the same graph each time
            await cv.update(stack, goal(value))
            # Its graph stored (an update preempted before that never stores one).
            await eventually(lambda: graph_stored(cv.pool, stack), what="the update's graph stored")
        assert (await cv.settled(stack))[:2] == ("UPDATE", "COMPLETE")
        assert_world_matches(cv.world, {"t": {"value": "3"}, "u": {"value": "3-u"}, "v": {"value": "3"}})
        assert cv.world.created == 3  # the three things, none created twice
        current = await cv.pool.fetchrow(
            """SELECT t.traversal_id, t.base FROM traversals t JOIN stacks s
               ON s.current_traversal = t.traversal_id WHERE s.stack_id = $1""",
            stack,
        )
        assert current is not None
        assert current["base"] is not None
        assert await own_rows_in(cv.pool, current["traversal_id"]) == 8  # each node done: a row each


async def graph_stored(pool: asyncpg.Pool, stack: StackId) -> bool:
    """Whether the graph of the stack's current traversal is stored."""
    return bool(
        await pool.fetchval(
            """SELECT t.remaining IS NOT NULL FROM traversals t JOIN stacks s
               ON s.current_traversal = t.traversal_id WHERE s.stack_id = $1""",
            stack,
        )
    )


async def own_rows_in(pool: asyncpg.Pool, traversal: TraversalId) -> int:
    return int(await pool.fetchval("SELECT count(*) FROM traversal_nodes WHERE traversal_id = $1", traversal))


async def test_nodes_finished_together_are_written_in_one_statement_own_and_carried_rows_alike(
    store: Store, db: asyncpg.Connection
) -> None:
    first, second = TraversalId(uuid.uuid4()), TraversalId(uuid.uuid4())
    graph = fan_in(4, existing=False)
    sink = forward(ResourceId(4))
    async with store.transaction() as tx:
        await tx.start_traversal(STACK, first, graph)
    async with store.transaction() as tx:
        await tx.start_traversal(STACK, second, graph, previous=first)  # all carried over
    one, two = forward(ResourceId(1)), forward(ResourceId(2))

    async with store.transaction() as tx:
        tx.finishing(second, one)  # done from here on in this transaction, written later
        state = await tx.node(second, one)
        assert state is not None
        assert state.done
        assert await own_rows(db, second) == 0, "nothing written yet"
        finished = await tx.finish_nodes([(second, one), (first, two), (second, one)])
        assert list(finished) == sorted([(first, two), (second, one)])
        assert all(f.synced == (sink,) and f.direct == () for f in finished.values())
        assert await tx.finish_nodes([(second, one), (first, two)]) == {}, "done already: left out"
    done = await db.fetch("SELECT traversal_id, node FROM traversal_nodes WHERE done ORDER BY node")
    assert {(r["traversal_id"], r["node"]) for r in done} == {(first, two), (second, one)}


async def test_a_node_finishing_in_an_undone_savepoint_reads_undone_again(store: Store) -> None:
    traversal = TraversalId(uuid.uuid4())
    async with store.transaction() as tx:
        await tx.start_traversal(STACK, traversal, fan_in(3, existing=False))
    one = forward(ResourceId(1))
    async with store.transaction() as tx:

        async def undone() -> None:
            async with tx.savepoint():
                tx.finishing(traversal, one)
                raise RuntimeError("undo the round")

        with pytest.raises(RuntimeError):
            await undone()
        state = await tx.node(traversal, one)
        assert state is not None
        assert not state.done
