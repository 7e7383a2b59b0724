"""An update preempts in its request's own short transaction; the new traversal's
graph is stored after, by whichever engine takes the `StartTraversal` it queued
(services/engine/traversal.py: `preempt`, `start_reserved`).

Real: PostgreSQL (a fresh, migrated database), the engine, worker and observer in
one process on the in-process bus (tests/support/convergence.py), the engine's own
transactions and recovery.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import asyncpg
import pytest
import yaml

from services.engine.core.model import Action, StackId, TemplateId, TraversalId
from services.engine.core.sources import RANDOM_IDS
from services.engine.effects import Effects
from services.engine.goals import GoalSpec
from services.engine.messages import StartTraversal
from services.engine.outbox import Outbox
from services.engine.recovery import Recovery
from services.engine.store.templates import TemplateRecord
from services.engine.traversal import preempt, start_reserved
from shared.errors import ConflictError
from tests.scenarios.library import assert_world_matches, hot, thing
from tests.support.convergence import Converge, converge, record_published
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

BEFORE = hot({"a": thing(value="a1"), "b": {**thing(value="b1"), "depends_on": ["a"]}})
AFTER = hot({"a": thing(value="a2"), "b": {**thing(value="b2"), "depends_on": ["a"]}})


async def created(cv: Converge) -> StackId:
    stack_id = await cv.create("s", BEFORE)
    assert await cv.settled(stack_id) == ("CREATE", "COMPLETE", "Stack CREATE completed successfully")
    return stack_id


async def current_traversal(pool: asyncpg.Pool, stack_id: StackId) -> TraversalId:
    found = await pool.fetchval("SELECT current_traversal FROM stacks WHERE stack_id = $1", stack_id)
    return TraversalId(found)


async def waits_for_a_lock(pool: asyncpg.Pool, *, timeout: float = 20) -> None:
    """Return once some session of this database waits for a lock (bounded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        waiting = await pool.fetchval(
            """SELECT count(*) FROM pg_stat_activity
               WHERE datname = current_database() AND wait_event_type = 'Lock'"""
        )
        if waiting:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("no session waited for a lock")


async def test_no_job_of_a_preempted_traversal_commits_after_the_update_did(database_url: str) -> None:
    """A transaction that issued a job confirms, as it commits, that the job's traversal
    is still its stack's, holding the stack row share-locked until the commit: an update
    arriving meanwhile waits for that commit, and one that committed first makes the job's
    transaction fail (a conflict: handled again, its check then finds itself preempted).
    The stack's traversal moves when the update's own transaction commits, before the
    new traversal's graph is stored."""
    async with converge(database_url, seed=1, duplicate_rate=0.0) as cv:
        stack_id = await created(cv)
        before = await current_traversal(cv.pool, stack_id)
        store = cv.engine.store

        async with store.transaction() as tx:  # a batch that issued a job of `before`, committing
            issuing = Effects()
            issuing.issued_for(stack_id, before)
            await issuing.commit(tx)
            update = asyncio.create_task(cv.update(stack_id, AFTER))
            await waits_for_a_lock(cv.pool)
            assert not update.done()
            assert await current_traversal(cv.pool, stack_id) == before
        await asyncio.wait_for(update, timeout=20)
        assert await current_traversal(cv.pool, stack_id) != before

        late = Effects()  # one that issued a job of `before` and commits after the update
        late.issued_for(stack_id, before)
        late.event(stack_id, "a", None, "Test::Thing", "UPDATE", "IN_PROGRESS", "late")
        with pytest.raises(ConflictError, match="preempted"):
            async with store.transaction() as tx:
                await late.commit(tx)
        assert await cv.settled(stack_id) == ("UPDATE", "COMPLETE", "Stack UPDATE completed successfully")
        assert "late" not in [e["reason"] for e in await cv.events(stack_id)]
        assert_world_matches(cv.world, {"a": {"value": "a2"}, "b": {"value": "b2"}})


async def test_an_update_whose_start_was_lost_is_started_again_by_recovery(database_url: str) -> None:
    """The request's transaction committed and its `StartTraversal` never arrived (lost
    with the broker, say): the stack is in progress with no graph, which the stall sweep
    finds and starts; the update then runs to its end."""
    async with converge(database_url, seed=2, duplicate_rate=0.0) as cv:
        stack_id = await created(cv)
        store = cv.engine.store
        template_id = TemplateId(uuid.uuid4())
        async with store.transaction() as tx:  # the request's transaction, its messages dropped
            stack = await tx.stack(stack_id, lock=True)
            assert stack is not None
            record = TemplateRecord(
                template_id=template_id, template=AFTER, environment={}, files={}, parameters={}
            )
            await tx.insert_template(stack_id, record)
            start = await preempt(
                tx, stack, template_id=template_id, action=Action.UPDATE, fx=Effects(), ids=RANDOM_IDS
            )
            traversal = TraversalId(start.traversal_id)
            assert await tx.graph_pending(traversal)
        assert await cv.state(stack_id) == ("UPDATE", "IN_PROGRESS")

        later = Recovery(
            store=store, outbox=cv.engine.outbox, stall_seconds=1, clock=lambda: time.time() + 3600
        )
        assert await later.recover_stalled() == 1
        assert await cv.settled(stack_id) == ("UPDATE", "COMPLETE", "Stack UPDATE completed successfully")
        assert await current_traversal(cv.pool, stack_id) == traversal
        assert_world_matches(cv.world, {"a": {"value": "a2"}, "b": {"value": "b2"}})
        reasons = [e["reason"] for e in await cv.events(stack_id) if e["resource_name"] == "s"]
        assert any("sent again: 1 traversal start" in r for r in reasons), reasons


async def test_a_traversal_is_started_once_however_often_its_start_arrives(database_url: str) -> None:
    """A second `StartTraversal` of a traversal already started (recovery's, under a new
    message id) stores nothing and sends no check; nor does one of a traversal a newer
    update has preempted since."""
    async with converge(database_url, seed=3, duplicate_rate=0.0) as cv:
        stack_id = await created(cv)
        await cv.update(stack_id, AFTER)
        assert await cv.settled(stack_id) == ("UPDATE", "COMPLETE", "Stack UPDATE completed successfully")
        traversal = await current_traversal(cv.pool, stack_id)
        nodes = await cv.pool.fetchval(
            "SELECT count(*) FROM traversal_nodes WHERE traversal_id = $1", traversal
        )

        store, definitions = cv.engine.store, cv.engine.deps.definitions
        for again in (traversal, TraversalId(uuid.uuid4())):  # started already; never the stack's
            fx = Effects()
            async with store.transaction() as tx:
                start = StartTraversal(stack_id=stack_id, traversal_id=again)
                await start_reserved(tx, start, fx, definitions=definitions)
            assert fx.messages == []
        assert (
            await cv.pool.fetchval("SELECT count(*) FROM traversal_nodes WHERE traversal_id = $1", traversal)
            == nodes
        )
        assert await cv.state(stack_id) == ("UPDATE", "COMPLETE")


async def test_the_engine_that_answers_stores_the_graph_and_the_outbox_covers_it_if_it_cannot(
    database_url: str,
) -> None:
    """The engine that answered the update stores the graph itself (it has the goal parsed):
    its `StartTraversal` is never sent. Had it died right after answering, the message is
    still in the outbox, and a relay sends it to whichever engine takes it."""
    async with converge(database_url, seed=4, duplicate_rate=0.0) as cv:
        stack_id = await created(cv)
        sent = record_published(cv, StartTraversal.kind, "traversal_id")
        await cv.update(stack_id, AFTER)
        assert await cv.settled(stack_id) == ("UPDATE", "COMPLETE", "Stack UPDATE completed successfully")
        assert sent == []
        assert await cv.pool.fetchval("SELECT count(*) FROM outbox") == 0

        cv.engine.operations._start_here = lambda start, outbox_id: None  # type: ignore[method-assign]
        await cv.update(stack_id, BEFORE)  # answered; then "died" before storing the graph
        assert await cv.state(stack_id) == ("UPDATE", "IN_PROGRESS")
        assert await cv.pool.fetchval("SELECT count(*) FROM outbox") == 1
        relay = Outbox(pool=cv.pool, bus=cv.engine.bus, stale_after=0)
        assert await relay.relay_once() == 1
        assert await cv.settled(stack_id) == ("UPDATE", "COMPLETE", "Stack UPDATE completed successfully")
        assert len(sent) == 1
        assert_world_matches(cv.world, {"a": {"value": "a1"}, "b": {"value": "b1"}})


@pytest.mark.parametrize("rollback", [True, False])
async def test_an_update_cancelled_before_its_graph_is_stored_stays_cancelled(
    database_url: str, rollback: bool
) -> None:
    """Cancelled between its answer and its graph: the cancel ends the operation as it
    would any other (rolled back to the template before, or stopped, FAILED), and the
    update's start, arriving after, finds the stack moved on and stores nothing."""
    async with converge(database_url, seed=5, duplicate_rate=0.0) as cv:
        stack_id = await created(cv)
        cv.engine.operations._start_here = lambda start, outbox_id: None  # type: ignore[method-assign]
        await cv.update(stack_id, AFTER)
        update = await current_traversal(cv.pool, stack_id)
        await cv.cancel(stack_id, rollback=rollback)
        starts = record_published(cv, StartTraversal.kind, "id")
        relay = Outbox(pool=cv.pool, bus=cv.engine.bus, stale_after=0)
        assert await relay.relay_once() >= 1  # the update's start among what it sends
        assert len(starts) == 1
        if rollback:
            assert (await cv.settled(stack_id))[:2] == ("ROLLBACK", "COMPLETE")
        else:
            assert await cv.settled(stack_id) == ("UPDATE", "FAILED", "Stack UPDATE cancelled")

        async def start_handled() -> bool:
            return bool(await cv.pool.fetchval("SELECT count(*) FROM inbox WHERE message_id = $1", starts[0]))

        await eventually(start_handled, what="the update's start handled")
        assert_world_matches(cv.world, {"a": {"value": "a1"}, "b": {"value": "b1"}})
        stored = await cv.pool.fetchval(
            "SELECT count(*) FROM traversal_nodes WHERE traversal_id = $1", update
        )
        assert stored == 0, "the cancelled update's graph was stored"


async def test_an_updates_documents_are_stored_as_the_pool_encoded_them_and_read_back_as_sent(
    database_url: str,
) -> None:
    """An update's documents reach PostgreSQL as the JSON text the template pool encoded
    (`goals.EncodedGoal`): text outside ASCII, a backslash that only looks like an escape,
    a number too big for 64 bits and the template's own text all come back unchanged."""
    template_text = (
        "heat_template_version: 2018-08-31\n"
        "# a comment the source keeps\n"
        "parameters:\n  p: {type: string}\n"
        "resources:\n"
        "  a: {type: Test::Thing, properties: {value: 'a2 \u00e9\u2603 \\u0000'}}\n"
        "  b: {type: Test::Thing, depends_on: [a], properties: {value: {get_param: p}}}\n"
    )
    environment = {"parameter_defaults": {"big": 2**70, "nested": [[1, {"x": None}], "\u00fc"]}}
    files = {"file:///f.yaml": "\u65e5\u672c"}
    async with converge(database_url, seed=2, duplicate_rate=0.0) as cv:
        stack_id = await created(cv)
        spec = GoalSpec(template_text, environment, {"p": "b2 \u00e9"}, files)
        await cv.engine.operations.update(stack_id, spec)
        assert await cv.settled(stack_id) == ("UPDATE", "COMPLETE", "Stack UPDATE completed successfully")
        template_id = await cv.pool.fetchval(
            "SELECT current_template_id FROM stacks WHERE stack_id = $1", stack_id
        )
        async with cv.engine.store.transaction() as tx:
            record = await tx.template(TemplateId(template_id))
        assert_world_matches(
            cv.world, {"a": {"value": "a2 \u00e9\u2603 \\u0000"}, "b": {"value": "b2 \u00e9"}}
        )
    assert record is not None
    assert record.template == yaml.safe_load(template_text.replace("2018-08-31", "'2018-08-31'"))
    assert record.template["resources"]["a"]["properties"]["value"] == "a2 \u00e9\u2603 \\u0000"
    assert record.environment == {
        "parameter_defaults": {"big": 2**70, "nested": [[1, {"x": None}], "\u00fc"]}
    }
    assert record.parameters == {"p": "b2 \u00e9"}
    assert record.files == files
    assert record.source == template_text
