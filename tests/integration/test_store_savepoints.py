"""A part of a transaction (`Tx.savepoint`, a follow-on round's): what it keeps, what it
undoes, and how long it lets a statement wait for a lock (`lock_wait`).

Real: PostgreSQL, the engine's store, and a second connection holding a row lock. The
part that succeeds is not released (its savepoint ends with the transaction), so these
tests also prove that leaving it open changes nothing a later part or the commit sees.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from services.engine.core.model import StackId
from services.engine.store.db import Store
from services.engine.store.tx import Tx
from shared.errors import ConflictError
from tests.support.databases import store_with_stack

pytestmark = pytest.mark.integration

STACK = StackId(uuid.UUID("00000000-0000-0000-0000-0000000000a1"))


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    async with store_with_stack(database_url, STACK, action="CREATE", pool_size=3) as store:
        yield store


async def timeout_mins(tx: Tx) -> int | None:
    row = await tx.stack(STACK)
    assert row is not None
    return row.timeout_mins


async def committed_timeout_mins(store: Store) -> int | None:
    async with store.transaction() as tx:
        return await timeout_mins(tx)


async def test_a_part_that_succeeds_is_kept_and_a_later_part_nests_after_it(store: Store) -> None:
    async with store.transaction() as tx:
        async with tx.savepoint(lock_wait=0.02):
            await tx.set_timeout(STACK, 7)
        async with tx.savepoint():  # begun inside the first's savepoint, never released
            assert await timeout_mins(tx) == 7
            await tx.set_timeout(STACK, 8)
    assert await committed_timeout_mins(store) == 8


async def test_a_part_that_raises_is_undone_and_the_rest_commits(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.set_timeout(STACK, 5)

        async def undone() -> None:
            async with tx.savepoint(lock_wait=0.02):
                await tx.set_timeout(STACK, 9)
                raise RuntimeError("undo the part")

        with pytest.raises(RuntimeError):
            await undone()
        assert await timeout_mins(tx) == 5
    assert await committed_timeout_mins(store) == 5


async def test_a_lock_held_past_the_parts_lock_wait_undoes_it_as_a_conflict(
    store: Store, database_url: str
) -> None:
    holder = await asyncpg.connect(database_url)
    try:
        async with holder.transaction():
            await holder.execute("SELECT 1 FROM stacks WHERE stack_id = $1 FOR UPDATE", STACK)
            async with store.transaction() as tx:

                async def blocked() -> None:
                    async with tx.savepoint(lock_wait=0.05):
                        await tx.stack(STACK, lock=True)

                with pytest.raises(ConflictError, match="concurrent update"):
                    async with asyncio.timeout(60):  # the lock is held until the end: bounded
                        await blocked()
                assert await tx.stack(STACK) is not None, "the transaction goes on after the part"
    finally:
        await holder.close()
