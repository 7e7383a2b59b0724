"""A batch's row writes held back and sent together (services/engine/store/row_writes.py),
and the references its forward checks require read ahead (`Tx.read_references`):
one statement for many compare-and-swaps, never a stale read, nothing kept of an undone
savepoint, and a row changed behind the writes' back fails the transaction.

Real: PostgreSQL (a stack's rows made by a real create through the engine), and the
engine's own `Tx` on a connection whose statements are counted.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import pytest

from services.engine.core.model import ResourceId, ResourceRow, StackId, Status
from services.engine.core.row_change import ResourceChange
from services.engine.store.tx import Tx
from shared.errors import ConflictError
from tests.support.convergence import Converge, converge

pytestmark = pytest.mark.integration

TEMPLATE = {
    "heat_template_version": "2016-10-14",
    "resources": {name: {"type": "Test::Thing", "properties": {"value": name}} for name in "abc"},
}


class Counted:
    """A connection that counts the statements sent through it."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self.statements: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._conn, name)
        if name in {"execute", "executemany", "fetch", "fetchrow", "fetchval"}:

            async def counted(sql: str, *args: Any, **kwargs: Any) -> Any:
                self.statements.append(sql)
                return await attr(sql, *args, **kwargs)

            return counted
        return attr


async def created(cv: Converge) -> tuple[StackId, list[int]]:
    stack = await cv.create("s", TEMPLATE)
    assert (await cv.settled(stack))[:2] == ("CREATE", "COMPLETE")
    return stack, sorted(r["resource_id"] for r in await cv.rows(stack))


async def prefetched(tx: Tx, stack: StackId, ids: list[int]) -> list[ResourceRow]:
    await tx.prefetch(resources=ids, stacks=[stack], nodes=[])
    rows = [await tx.resource(i) for i in ids]
    assert all(row is not None for row in rows)
    return [row for row in rows if row is not None]


@asynccontextmanager
async def counted_batch(
    cv: Converge, stack: StackId, ids: list[int]
) -> AsyncIterator[tuple[Tx, Counted, list[ResourceRow]]]:
    """A transaction that holds the stack's rows prefetched (so locked), its statements counted."""
    async with cv.pool.acquire() as conn, conn.transaction():
        counted = Counted(conn)
        tx = Tx(cast(Any, counted))  # a stand-in for the connection
        yield tx, counted, await prefetched(tx, stack, ids)


async def test_writes_to_locked_rows_go_in_one_statement_and_are_read_back_written(
    database_url: str,
) -> None:
    async with converge(database_url, seed=0, duplicate_rate=0.0) as cv:
        stack, ids = await created(cv)
        async with counted_batch(cv, stack, ids) as (tx, counted, rows):
            before = len(counted.statements)
            for row in rows:
                change = ResourceChange(
                    status_reason=f"held {row.name}", requires=frozenset({ResourceId(7), ResourceId(3)})
                )
                assert await tx.update_resource(row, change)
            assert len(counted.statements) == before, "held back: nothing sent yet"
            again = await tx.resource(ids[0])  # a read of the table sends them first, together
            assert len(counted.statements) == before + 2
            assert again is not None
            assert (again.status_reason, again.requires, again.version) == (
                "held a",
                frozenset({3, 7}),
                rows[0].version + 1,
            )
            # A second change of a written row is held again, from its new version.
            assert await tx.update_resource(again, ResourceChange(status=Status.FAILED))
            await tx.flush_writes()
        by_name = {r["name"]: r for r in await cv.rows(stack)}
        assert {n: by_name[n]["status_reason"] for n in "abc"} == {n: f"held {n}" for n in "abc"}
        assert by_name["a"]["status"] == "FAILED"
        assert by_name["a"]["version"] == rows[0].version + 2


async def test_a_savepoint_undone_keeps_none_of_the_writes_held_in_it(database_url: str) -> None:
    async with converge(database_url, seed=0, duplicate_rate=0.0) as cv:
        stack, ids = await created(cv)
        async with cv.engine.store.transaction() as tx:  # commits what is held at its end
            rows = await prefetched(tx, stack, ids)

            async def undone_round() -> None:
                async with tx.savepoint():
                    assert await tx.update_resource(rows[0], ResourceChange(status_reason="undone"))
                    raise RuntimeError("undo the round")

            with pytest.raises(RuntimeError):
                await undone_round()
            assert await tx.update_resource(rows[1], ResourceChange(status_reason="kept"))
        reasons = {r["name"]: r["status_reason"] for r in await cv.rows(stack)}
        assert reasons["a"] != "undone"
        assert reasons["b"] == "kept"


@pytest.mark.parametrize("held", ["change", "delete"])
async def test_a_held_write_whose_row_changed_meanwhile_fails_the_transaction(
    database_url: str, held: str
) -> None:
    async with converge(database_url, seed=0, duplicate_rate=0.0) as cv:
        stack, ids = await created(cv)

        async def changed_behind_its_back() -> None:
            async with cv.pool.acquire() as conn, conn.transaction():
                tx = Tx(conn)
                rows = await prefetched(tx, stack, ids)
                if held == "change":
                    assert await tx.update_resource(rows[0], ResourceChange(status_reason="lost"))
                else:
                    assert await tx.delete_resource(rows[0])
                # Nothing in the engine does this: a statement that bypasses the transaction's `Tx`.
                bump = "UPDATE resources SET version = version + 1 WHERE resource_id = $1"
                await conn.execute(bump, ids[0])
                await tx.flush_writes()

        with pytest.raises(ConflictError):
            await changed_behind_its_back()
        reasons = {r["name"]: r["status_reason"] for r in await cv.rows(stack)}
        assert len(reasons) == len(ids), "no row deleted"
        assert reasons["a"] != "lost"


async def test_without_prefetched_rows_a_write_is_sent_at_once(database_url: str) -> None:
    async with converge(database_url, seed=0, duplicate_rate=0.0) as cv:
        _, ids = await created(cv)
        async with cv.pool.acquire() as conn, conn.transaction():
            counted = Counted(conn)
            tx = Tx(cast(Any, counted))  # a stand-in for the connection
            row = await tx.resource(ids[0])
            assert row is not None
            assert await tx.update_resource(row, ResourceChange(status_reason=str(uuid.uuid4())))
            assert len(counted.statements) == 2


async def test_references_read_ahead_are_served_until_their_row_is_written(database_url: str) -> None:
    async with converge(database_url, seed=0, duplicate_rate=0.0) as cv:
        stack, ids = await created(cv)
        async with cv.pool.acquire() as conn, conn.transaction():
            counted = Counted(conn)
            tx = Tx(cast(Any, counted))  # a stand-in for the connection
            rows = await prefetched(tx, stack, ids[:1])
            await tx.read_references({stack: {"a", "b", "gone"}})
            before = len(counted.statements)
            found = await tx.references(stack, ["a", "b", "gone"])
            assert sorted(found) == ["a", "b"]
            assert len(counted.statements) == before, "served from the references read ahead"
            a = rows[0]
            assert (found["a"].resource_id, found["a"].physical_id) == (a.resource_id, a.physical_id)
            assert found["a"].attributes == a.attributes
            assert await tx.update_resource(a, ResourceChange(physical_id="written", attributes={"x": 1}))
            again = await tx.references(stack, ["a", "b"])
            assert (again["a"].physical_id, again["a"].attributes) == ("written", {"x": 1}), "read again"
            assert len(counted.statements) == before + 2  # the held write, then the read


async def test_deletes_of_locked_rows_go_in_one_statement_after_the_changes_and_are_read_back_gone(
    database_url: str,
) -> None:
    async with converge(database_url, seed=0, duplicate_rate=0.0) as cv:
        stack, ids = await created(cv)
        async with counted_batch(cv, stack, ids) as (tx, counted, rows):
            before = len(counted.statements)
            assert await tx.update_resource(rows[0], ResourceChange(status_reason="kept, changed"))
            assert await tx.delete_resource(rows[1])
            assert await tx.delete_resource(rows[2])
            assert len(counted.statements) == before, "held back: nothing sent yet"
            assert await tx.resource(ids[1]) is None  # a read of the table sends them first
            assert len(counted.statements) == before + 3  # the change, the deletes, the read
            kept = await tx.resource(ids[0])
            assert kept is not None
            assert kept.status_reason == "kept, changed"
        assert [r["resource_id"] for r in await cv.rows(stack)] == ids[:1]
