"""A traversal's end is counted on shards (services/engine/store/graph.py `count_down`,
`core.end_count`): batches finishing nodes of one traversal at once each take from a
shard no other holds, without waiting; exactly one of them sees the traversal end.

Real: PostgreSQL (a fresh, migrated database), transactions on separate connections
held open as a batch's are between its count and its commit.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from services.engine.core.end_count import SHARDS
from services.engine.core.graph import traversal_graph
from services.engine.core.model import GraphNode, Node, ResourceId, StackId, TraversalId
from services.engine.store import Store
from shared.errors import ConflictError, PermanentError
from tests.support.databases import store_with_stack

pytestmark = pytest.mark.integration

STACK = StackId(uuid.uuid4())


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    async with store_with_stack(database_url, STACK, action="CREATE", pool_size=SHARDS + 4) as store:
        yield store


def independent(n: int) -> dict[Node, GraphNode]:
    """`n` resources requiring nothing: `n` sinks, each counted."""
    return traversal_graph(
        template_requires={f"r{i}": frozenset() for i in range(n)},
        current_rows={f"r{i}": ResourceId(i + 1) for i in range(n)},
        existing=[],
    )


async def started(store: Store, resources: int) -> TraversalId:
    """A traversal of `resources` independent resources, stored."""
    traversal = TraversalId(uuid.uuid4())
    async with store.transaction() as tx:
        await tx.start_traversal(STACK, traversal, independent(resources))
    return traversal


async def shards(db: asyncpg.Connection, traversal: TraversalId) -> list[int]:
    rows = await db.fetch(
        "SELECT remaining FROM traversal_counts WHERE traversal_id = $1 ORDER BY shard", traversal
    )
    return [r["remaining"] for r in rows]


async def test_batches_counting_down_at_once_end_the_traversal_exactly_once(
    store: Store, db: asyncpg.Connection
) -> None:
    traversal = await started(store, 300)
    assert sum(await shards(db, traversal)) == 300
    rnd = random.Random(7)
    sizes = [rnd.randint(1, 7) for _ in range(60)]
    sizes.append(300 - sum(sizes))
    assert sizes[-1] > 0

    async def batch(n: int) -> bool:
        for _ in range(20):  # a deadlock in the end phase is retried, as a batch is
            try:
                async with store.transaction() as tx:
                    ended = await tx.count_down(traversal, n)
                    await asyncio.sleep(rnd.random() / 50)  # the rest of the batch, then the commit
                    return ended
            except ConflictError:
                continue
        raise AssertionError("a batch never got through")

    ends = await asyncio.gather(*(batch(n) for n in sizes))
    assert ends.count(True) == 1
    assert await shards(db, traversal) == [0] * SHARDS
    assert await db.fetchval("SELECT remaining FROM traversals WHERE traversal_id = $1", traversal) == 0


async def test_a_batch_takes_another_shard_rather_than_wait_for_one_held(
    store: Store, db: asyncpg.Connection
) -> None:
    traversal = await started(store, 8 * SHARDS)
    holding = asyncio.Event()
    release = asyncio.Event()

    async def first() -> None:
        async with store.transaction() as tx:
            assert not await tx.count_down(traversal, 3)
            holding.set()
            await release.wait()

    held = asyncio.create_task(first())
    await asyncio.wait_for(holding.wait(), 30)
    async with store.transaction() as tx:  # would wait for `first` if it took shard 0
        assert not await asyncio.wait_for(tx.count_down(traversal, 2), 30)
    release.set()
    await held
    assert (await shards(db, traversal))[:2] == [5, 6]


async def test_near_the_end_a_batch_takes_from_several_shards_and_the_last_one_ends_it(
    store: Store, db: asyncpg.Connection
) -> None:
    traversal = await started(store, 2 * SHARDS)
    async with store.transaction() as tx:
        assert not await tx.count_down(traversal, 2)  # a shard at zero, the others open
        assert not await tx.count_down(traversal, 5)  # no shard holds 5: three give theirs
    assert sorted(await shards(db, traversal)) == [0, 0, 0, 1] + [2] * (SHARDS - 4)
    async with store.transaction() as tx:
        assert not await tx.count_down(traversal, 2 * SHARDS - 8)
        assert await tx.count_down(traversal, 1)
    assert await db.fetchval("SELECT remaining FROM traversals WHERE traversal_id = $1", traversal) == 0
    with pytest.raises(PermanentError, match="1 to count down, 0 left"):
        async with store.transaction() as tx:
            await tx.count_down(traversal, 1)  # counted twice: a bug, not a second end


async def test_a_traversal_stored_before_shards_counts_its_nodes_on_its_row(
    store: Store, db: asyncpg.Connection
) -> None:
    traversal = TraversalId(uuid.uuid4())
    await db.execute(
        "INSERT INTO traversals (traversal_id, stack_id, remaining) VALUES ($1, $2, 3)", traversal, STACK
    )
    async with store.transaction() as tx:
        assert not await tx.count_down(traversal, 2)
    async with store.transaction() as tx:
        assert await tx.count_down(traversal, 1)
