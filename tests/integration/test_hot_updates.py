"""A traversal's node rows are updated in place on their page (migration 0021).

Each node row is updated two or three times per traversal (its reports counted, then
done). When the new version fits on the row's own page and no indexed column changed,
PostgreSQL writes it as a heap-only tuple (HOT): no index entry is added and the old
version is pruned without a vacuum. These tests update a traversal's nodes as the
engine does and read PostgreSQL's own count of that transaction's HOT updates.
"""

from __future__ import annotations

import uuid

import asyncpg

from services.engine.store.migrate import migrate
from tests.support.databases import layered_rows

NODES = 2_000


async def _traversal_with_nodes(db: asyncpg.Connection) -> uuid.UUID:
    stack_id = await layered_rows(db, project="p", name="s", rows=10, width=5)
    traversal = uuid.uuid4()
    await db.execute(
        "INSERT INTO traversals (traversal_id, stack_id, remaining) VALUES ($1, $2, $3)",
        traversal,
        stack_id,
        NODES,
    )
    await db.execute(
        """INSERT INTO traversal_nodes (traversal_id, node, requires_count)
           SELECT $1, n, 2 FROM generate_series(1, $2) n""",
        traversal,
        NODES,
    )
    return traversal


_COUNTS = """SELECT pg_stat_get_xact_tuples_updated('traversal_nodes'::regclass) AS updated,
                     pg_stat_get_xact_tuples_hot_updated('traversal_nodes'::regclass) AS hot"""


async def _hot_share(db: asyncpg.Connection, sql: str, *args: object) -> float:
    """The share of the rows `sql` updates in `traversal_nodes` that were HOT updates
    (the counts not yet reported, read before and after it in one transaction)."""
    async with db.transaction():
        before = await db.fetchrow(_COUNTS)
        await db.execute(sql, *args)
        after = await db.fetchrow(_COUNTS)
    assert before is not None
    assert after is not None
    updated: int = after["updated"] - before["updated"]
    hot: int = after["hot"] - before["hot"]
    assert updated == NODES
    return float(hot) / updated


async def test_a_freshly_stored_graphs_nodes_take_their_first_report_in_place(db: asyncpg.Connection) -> None:
    await migrate(db)
    traversal = await _traversal_with_nodes(db)
    share = await _hot_share(
        db, "UPDATE traversal_nodes SET satisfied = satisfied || node WHERE traversal_id = $1", traversal
    )
    # Each new version is a little longer than the row it replaces (a report more): 82%
    # of them fit beside the rows a page was filled with, none with pages filled full.
    assert share >= 0.75, f"only {share:.0%} of the first reports were HOT updates"


async def test_nodes_are_finished_in_place_after_their_reports(db: asyncpg.Connection) -> None:
    await migrate(db)
    traversal = await _traversal_with_nodes(db)
    for report in (1, 2):  # two reports, each its own transaction, as two batches would
        await db.execute(
            "UPDATE traversal_nodes SET satisfied = satisfied || $2::bigint WHERE traversal_id = $1",
            traversal,
            report,
        )
    share = await _hot_share(db, "UPDATE traversal_nodes SET done = true WHERE traversal_id = $1", traversal)
    assert share >= 0.9, f"only {share:.0%} of the nodes were finished with HOT updates"
