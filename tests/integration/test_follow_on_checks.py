"""The node checks a batch triggers are handled in its own transaction, not sent
(services/engine/convergence/follow_on.py); what cannot be handled there is sent.

Real: PostgreSQL, the engine (built from settings as `converge-engine` builds it),
worker and observer, on the in-process bus without disorder. What goes through the
engine queue is read off the bus's publishes: a node check published is one that was
not handled where it was triggered.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

import pytest

from services.engine.core.model import StackId
from services.engine.core.sources import Ids
from services.engine.messages import CheckResource
from services.engine.store.tx import Tx
from tests.support.convergence import Converge, converge, record_published
from tests.support.engine_settings import engine_settings

pytestmark = pytest.mark.integration


def chain(names: Sequence[str], **extra: dict[str, Any]) -> dict[str, Any]:
    """`names` in a line, each needing the one before; `extra`: properties by name."""
    resources: dict[str, Any] = {}
    for before, name in zip([None, *names], names, strict=False):
        body: dict[str, Any] = {"type": "Test::Thing", "properties": {"value": name, **extra.get(name, {})}}
        if before is not None:
            body["depends_on"] = [before]
        resources[name] = body
    return {"heat_template_version": "2016-10-14", "resources": resources}


def record_checks_sent(cv: Converge) -> list[int]:
    """The resource ids of the node checks published on the engine queue from now on."""
    return record_published(cv, CheckResource.kind, "resource_id")


async def names_of(cv: Converge, stack: StackId, resource_ids: list[int]) -> list[str]:
    by_id = {r["resource_id"]: r["name"] for r in await cv.rows(stack)}
    return sorted(by_id[i] for i in resource_ids)


@pytest.mark.parametrize(("follow_on", "sent"), [(256, ["a"]), (0, ["a", "b", "c", "d", "e"])])
async def test_a_chain_is_checked_where_each_job_result_lands_unless_follow_on_is_off(
    database_url: str, follow_on: int, sent: list[str]
) -> None:
    settings = engine_settings(engine_batch_follow_on=follow_on)
    async with converge(database_url, seed=0, duplicate_rate=0.0, settings=settings) as cv:
        checks = record_checks_sent(cv)
        stack = await cv.create("s", chain("abcde"))
        assert (await cv.settled(stack))[:2] == ("CREATE", "COMPLETE")
        assert sorted(real.properties["value"] for real in cv.world.live.values()) == list("abcde")
        # Only the operation's own first check goes through the queue: b..e were each
        # checked (and their jobs issued) in the transaction of the result before them.
        assert await names_of(cv, stack, checks) == sent


async def test_a_follow_on_check_that_cannot_be_decided_there_is_undone_and_sent(database_url: str) -> None:
    # b's value is a yaql expression over a's attribute: resolved in the template pool,
    # never inside a transaction, so its follow-on check is undone and sent; c, after b's
    # result, is checked where that result lands again.
    yaql = {"value": {"yaql": {"expression": "$.data.v + '!'", "data": {"v": {"get_attr": ["a", "value"]}}}}}
    async with converge(database_url, seed=0, duplicate_rate=0.0) as cv:
        checks = record_checks_sent(cv)
        stack = await cv.create("s", chain("abc", b=yaql))
        assert (await cv.settled(stack))[:2] == ("CREATE", "COMPLETE")
        assert sorted(real.properties["value"] for real in cv.world.live.values()) == ["a", "a!", "c"]
        assert await names_of(cv, stack, checks) == ["a", "b"]
        assert cv.world.created == 3  # the undone round issued nothing that ran


async def test_prefetch_skipping_locked_rows_reads_the_others_without_waiting(database_url: str) -> None:
    async with converge(database_url, seed=0, duplicate_rate=0.0) as cv:
        stack = await cv.create("s", chain("ab"))
        assert (await cv.settled(stack))[:2] == ("CREATE", "COMPLETE")
        held, free = sorted(r["resource_id"] for r in await cv.rows(stack))
        async with cv.pool.acquire() as holder, holder.transaction():
            await holder.execute("SELECT 1 FROM resources WHERE resource_id = $1 FOR UPDATE", held)
            async with cv.pool.acquire() as conn, conn.transaction():
                tx = Tx(conn)
                read = await asyncio.wait_for(  # waiting for the held row would time out here
                    tx.prefetch(resources=[held, free], stacks=[stack], nodes=[], skip_locked=True),
                    timeout=10,
                )
                assert read == {free}
                row = await tx.resource(free)
                assert row is not None
                assert row.name == "b"


async def test_the_checks_of_a_stack_an_operation_is_claiming_are_sent_not_taken(database_url: str) -> None:
    # An operation that announced its claim (here held open in a transaction of the
    # test's own) would wait for every row a batch takes: its stack's checks are sent.
    stack = StackId(uuid.uuid4())
    planned: list[uuid.UUID] = []  # the next new id the engine draws, if any
    ids = Ids(new=lambda: planned.pop() if planned else uuid.uuid4())
    async with converge(database_url, seed=0, duplicate_rate=0.0, ids=ids) as cv:
        checks = record_checks_sent(cv)
        async with cv.pool.acquire() as conn, conn.transaction():
            await Tx(conn).announce_claim(stack)
            async with cv.pool.acquire() as other, other.transaction():
                assert await Tx(other).claims_under_way([stack, StackId(uuid.uuid4())]) == {stack}
            planned.append(stack)  # the create's first new id is its stack's
            assert await cv.create("s", chain("abcde")) == stack
            assert (await cv.settled(stack))[:2] == ("CREATE", "COMPLETE")
        assert await names_of(cv, stack, checks) == list("abcde")
        async with cv.pool.acquire() as other, other.transaction():
            assert await Tx(other).claims_under_way([stack]) == set(), "the claim ended with its transaction"
