"""Resource reads cost what they return (H2): one resource is found by (stack, name), a
page of a list reads its rows and no more, and no statement runs a subquery per row.

Real: PostgreSQL with Converge's schema and a stack of a few thousand rows written
with SQL. `Queries` runs on a real pool; the statements it sends are recorded (a thin
wrapper at our seam, delegating every call) and explained by PostgreSQL itself.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from services.engine.store import connect
from services.engine.store.migrate import migrate
from services.engine.store.queries import Queries
from tests.support.databases import layered_rows

pytestmark = pytest.mark.integration

ROWS = 3000
WIDTH = 100
#: Small stacks beside the large one, and their rows.
SMALL_STACKS, SMALL_ROWS = 40, 20


#: A statement as sent: its text, its arguments, and the planner settings its
#: transaction set before it ("" for none).
Statement = tuple[str, tuple[Any, ...], str]


class RecordingPool:
    """Delegates to a real pool, keeping each statement and its arguments (also those
    read through a cursor on a connection it hands out), with the planner settings
    set before it on its connection's transaction."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self.statements: list[Statement] = []
        self.transactions = 0  # begun on its connections with settings of their own

    async def fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        self.statements.append((sql, args, ""))
        return list(await self.pool.fetch(sql, *args))

    async def fetchrow(self, sql: str, *args: Any) -> asyncpg.Record | None:
        self.statements.append((sql, args, ""))
        return await self.pool.fetchrow(sql, *args)

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[RecordingConnection]:
        async with self.pool.acquire() as conn:
            yield RecordingConnection(conn, self)


class RecordingConnection:
    def __init__(self, conn: Any, recording: RecordingPool) -> None:
        self._conn = conn
        self._recording = recording
        self._statements = recording.statements
        self._settings = ""

    def transaction(self, **kwargs: Any) -> Any:
        return self._conn.transaction(**kwargs)

    def cursor(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        self._statements.append((sql, args, self._settings))
        return self._conn.cursor(sql, *args, **kwargs)

    async def execute(self, sql: str) -> str:
        """A transaction's start is kept as the settings of the statements after it (a
        read's planner settings), until its end."""
        self._settings = sql if sql.startswith("BEGIN") else ""
        self._recording.transactions += bool(self._settings)
        return str(await self._conn.execute(sql))

    async def fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        self._statements.append((sql, args, self._settings))
        return list(await self._conn.fetch(sql, *args))


@pytest.fixture(params=["analyzed", "never analyzed"])
async def stack(
    request: pytest.FixtureRequest, database_url: str
) -> AsyncIterator[tuple[RecordingPool, uuid.UUID]]:
    """A stack of ROWS resources (`layered_rows`) beside small ones. "analyzed": the
    planner's statistics know it. "never analyzed": the table's statistics were never
    gathered, as in a new deployment's first minute (autovacuum has not run yet); a
    stale estimate of a large young stack misleads the planner the same way: PostgreSQL
    then believes the stack has a handful of rows."""
    pool = await connect(database_url, size=2)
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
            for i in range(SMALL_STACKS):
                await layered_rows(conn, project="p", name=f"small-{i}", rows=SMALL_ROWS, width=WIDTH)
            stack_id = await layered_rows(conn, project="p", name="big", rows=ROWS, width=WIDTH)
            if request.param == "analyzed":
                await conn.execute("ANALYZE resources")
        yield RecordingPool(pool), stack_id
    finally:
        await pool.close()


async def explain(pool: RecordingPool, sql: str, args: tuple[Any, ...], settings: str) -> dict[str, Any]:
    """What PostgreSQL did for a recorded statement, under the settings it was sent with:
    the plan ("Plan") and whether it compiled the statement first ("JIT")."""
    async with pool.pool.acquire() as conn:
        await conn.execute(settings or "BEGIN READ ONLY")
        raw = await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", *args)
        await conn.execute("ROLLBACK")
    found: dict[str, Any] = (json.loads(raw) if isinstance(raw, str) else raw)[0]
    return found


async def plan(pool: RecordingPool, sql: str, args: tuple[Any, ...], settings: str) -> dict[str, Any]:
    found: dict[str, Any] = (await explain(pool, sql, args, settings))["Plan"]
    return found


def nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [node, *(n for child in node.get("Plans", []) for n in nodes(child))]


def scanned(node: dict[str, Any]) -> int:
    """Rows the plan's scans of `resources` read: those they produced and those their
    conditions removed (per loop, times loops)."""
    return sum(
        int(
            (
                n["Actual Rows"]
                + n.get("Rows Removed by Filter", 0)
                + n.get("Rows Removed by Index Recheck", 0)
            )
            * n["Actual Loops"]
        )
        for n in nodes(node)
        if n.get("Relation Name") == "resources"
    )


async def test_showing_one_resource_reads_its_row_by_name_and_no_subquery_per_row(
    stack: tuple[RecordingPool, uuid.UUID],
) -> None:
    pool, stack_id = stack
    queries = Queries(pool)  # type: ignore[arg-type]  # the recording wrapper at our seam
    row = await queries.resource(stack_id, "r1500")
    assert row is not None
    edges = await queries.required_by(stack_id, [row["resource_id"]])
    assert edges == {row["resource_id"]: ("r1599", "r1600")}
    assert len(pool.statements) == 2, "two statements, whatever the stack's size"
    lookup = await plan(pool, *pool.statements[0])
    assert not any(n.get("Parent Relationship") == "SubPlan" for n in nodes(lookup))
    assert any(n.get("Index Name") == "resources_page" for n in nodes(lookup))
    assert scanned(lookup) == 1, "one row read to find one resource"
    reverse = await plan(pool, *pool.statements[1])
    assert not any(n.get("Parent Relationship") == "SubPlan" for n in nodes(reverse))
    assert scanned(reverse) == 2, "the two rows that require it read, not the stack's"


async def test_a_page_of_the_list_with_its_required_by_reads_that_page_and_one_pass_gives_every_required_by(
    stack: tuple[RecordingPool, uuid.UUID],
) -> None:
    pool, stack_id = stack
    queries = Queries(pool)  # type: ignore[arg-type]
    first = await queries.resources(stack_id, limit=100)
    assert [r["name"] for r in first][:3] == ["r0", "r1", "r10"]
    page = await queries.resources(stack_id, after=("r1500", 0), limit=100, with_required_by=True)
    assert [r["name"] for r in page][:2] == ["r1500", "r1501"]
    assert [r["name"] for r in page] == sorted(r["name"] for r in page)
    edges = await queries.required_by(stack_id)
    assert len(edges) == ROWS - WIDTH + 1, "every row but the last layer is required by something"
    assert edges[page[0]["resource_id"]] == ("r1599", "r1600")
    assert {r["resource_id"]: tuple(r["required_by"]) for r in page} == {
        r["resource_id"]: edges.get(r["resource_id"], ()) for r in page
    }
    assert len(pool.statements) == 3
    first_listing, listing, reverse = [await plan(pool, *statement) for statement in pool.statements]
    for explained in (first_listing, listing, reverse):
        assert not any(n.get("Parent Relationship") == "SubPlan" for n in nodes(explained))
    assert scanned(first_listing) <= 100, "the first page reads its rows, not the stack's"
    assert scanned(listing) <= 100 + 2 * 100, "a page reads its rows and those requiring them"
    assert "JIT" not in await explain(pool, *pool.statements[1]), "no compiling for a page"
    assert scanned(reverse) <= ROWS + SMALL_STACKS * SMALL_ROWS, "one pass over the stack's rows at most"


async def test_pages_read_on_one_indexed_transaction_each_read_their_rows_in_one_statement(
    stack: tuple[RecordingPool, uuid.UUID],
) -> None:
    pool, stack_id = stack
    queries = Queries(pool)  # type: ignore[arg-type]
    names: list[str] = []
    after = None
    async with queries.by_index() as reads:
        while True:
            page = await queries.resources(stack_id, after=after, limit=1000, within=reads)
            names += [r["name"] for r in page]
            if len(page) < 1000:
                break
            after = (page[-1]["name"], page[-1]["resource_id"])
    assert names == sorted(f"r{i}" for i in range(ROWS)), "every row once, in name order"
    assert len(pool.statements) == 4, "a statement per page, nothing else"
    assert pool.transactions == 1, "all on one transaction"
    for statement in pool.statements:
        assert statement[2].startswith("BEGIN READ ONLY"), "each planned under the transaction's settings"
        assert scanned(await plan(pool, *statement)) <= 1000, "each page reads its rows"
