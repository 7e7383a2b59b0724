"""Starting a traversal, and what a failed one turns into (rollback or FAILED).

Where it sits: `operations` starts traversals for create/update/delete;
`convergence` calls `fail_or_roll_back` when a resource fails or the stack times
out, and `operations` when an update is cancelled. Starting a traversal is
one transaction (`begin_traversal`): new rows for new resources, the graph
(`core.graph`), the stack's fresh traversal id (which alone preempts whatever
was running) and checks for the graph's leaves. An update or delete asked
through the API starts in two (`preempt`, then `start_reserved`, run by the
engine that answered or, if it cannot, by whichever engine the `StartTraversal`
queued in the outbox reaches): the request's transaction only moves the
traversal id, so the preemption does not wait for the stack's rows; the rows,
the graph and the first checks follow.

Rollback converges back to the previous template (nothing, after a failed
create); an operation towards the template the stack already had (a heal)
is not rolled back. A resource that was replaced during the failed operation and whose
original still exists is restored by making the original current again: no
third copy is created, and its dependents move back to it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from services.engine.collector import COLLECTOR
from services.engine.core.graph import action_graph, leaves, traversal_graph
from services.engine.core.model import (
    STACK_ACTIONS,
    Action,
    GraphNode,
    Node,
    ResourceId,
    ResourceRow,
    RowLinks,
    StackId,
    StackRow,
    Status,
    TemplateId,
    TraversalId,
)
from services.engine.core.model import resource_of as row_of
from services.engine.core.node_checks import originals_to_restore, rolls_back
from services.engine.core.row_change import ResourceChange
from services.engine.core.sources import Ids
from services.engine.definitions import DefinitionCache
from services.engine.effects import Effects
from services.engine.messages import StartTraversal
from services.engine.nested.answer import Answers
from services.engine.store.templates import TemplateRecord
from services.engine.store.tx import Tx
from services.engine.template import StackDefinition, UncheckedValue
from shared.errors import ConflictError
from shared.protocol import ENGINE_QUEUE

log = structlog.get_logger(__name__)

EMPTY_TEMPLATE: Mapping[str, Any] = {"heat_template_version": "2013-05-23", "resources": {}}


async def begin_traversal(
    tx: Tx,
    stack: StackRow,
    *,
    template_id: TemplateId,
    definition: StackDefinition,
    action: Action,
    fx: Effects,
    existing: list[ResourceRow],
    reason: str = "",
    answers: Answers | None = None,
    ids: Ids,
) -> TraversalId:
    """`existing` are the stack's rows from `Tx.claim_resources` in this transaction;
    `answers` answers a parent's job when the operation ends at once (a child stack);
    the traversal's id comes from `ids`."""
    traversal = ids.traversal()
    if action is Action.ROLLBACK:
        existing = await _restore_originals(tx, existing, template_id)
    graph = await _lay_out(tx, stack, template_id, definition, existing)
    reason = reason or f"Stack {action.value} started"
    # What the new goal's parameters were accepted with unchecked (a rollback or delete
    # goes back to a goal already announced).
    notes = () if action in (Action.ROLLBACK, Action.DELETE) else definition.unchecked
    await _launch(
        tx, stack, traversal, graph, template_id, stack.current_template_id, action, reason, fx, notes=notes
    )
    if not graph and answers is not None:
        done = Status.COMPLETE
        await answers.stack_ended(tx, _as(stack, action), done, _done(action), fx, definition=definition)
    return traversal


async def preempt(
    tx: Tx,
    stack: StackRow,
    *,
    template_id: TemplateId,
    action: Action,
    fx: Effects,
    ids: Ids,
    notes: Sequence[UncheckedValue] = (),
) -> StartTraversal:
    """Start an update (or delete) of `stack` (its row locked) towards `template_id`
    in two steps, the first of them now: a new traversal becomes the stack's, which
    preempts the one running (from this transaction's commit on, no job of it commits:
    `Effects.commit`, `Tx.confirm_traversals`), and a `StartTraversal` is queued for
    the second, `start_reserved`, which stores the graph and triggers its leaves.
    What grows with the stack (reading and claiming its rows, the graph) is not in
    the request's transaction, and any engine can do it. `notes`: as `_launch`'s.
    Returns the `StartTraversal` queued (its `traversal_id` is the new traversal's)."""
    traversal = ids.traversal()
    await tx.reserve_traversal(stack.stack_id, traversal)
    reason = f"Stack {action.value} started"
    await _announce(tx, stack, traversal, template_id, stack.current_template_id, action, reason, fx, notes)
    start = StartTraversal(stack_id=stack.stack_id, traversal_id=traversal)
    fx.emit(ENGINE_QUEUE, start)
    return start


async def start_reserved(tx: Tx, msg: StartTraversal, fx: Effects, *, definitions: DefinitionCache) -> None:
    """The second step of `preempt`: store the graph of the traversal `msg` names, from
    the goal the stack then has and its rows (claimed, as `begin_traversal`'s), and
    trigger its leaves. Nothing if the stack has moved on to a newer traversal or the
    graph is stored already (a duplicate, or recovery's: `graph_pending`)."""
    stack_id, traversal = StackId(msg.stack_id), TraversalId(msg.traversal_id)

    async def pending(stack: StackRow | None) -> tuple[StackRow, TemplateId] | None:
        """`stack` and its goal's template, if `traversal` is its own and waits for its graph."""
        if stack is None or stack.current_traversal != traversal or stack.current_template_id is None:
            return None
        return (stack, stack.current_template_id) if await tx.graph_pending(traversal) else None

    found = await pending(await tx.stack(stack_id))
    if found is None:
        log.debug("start_superseded", traversal_id=str(traversal))
        return
    template_id = found[1]
    # A definition parsed here: before any row is locked. One packed here by the update's
    # request (`goals.prepare_update`): unpickled while PostgreSQL claims the rows.
    definition = None if definitions.is_packed(template_id) else await definitions.get(tx, *found)
    await tx.announce_claim(stack_id)  # batches leave its rows alone meanwhile
    claiming = asyncio.ensure_future(tx.claim_links(stack_id))  # rows before the stack row
    try:
        await asyncio.sleep(0)  # the claim's statement is sent
        definition = definition or definitions.at_hand(template_id)  # no statement of its own
    except asyncio.CancelledError:  # the engine stops: not waiting for the locks the claim waits on
        claiming.cancel()
        raise
    finally:  # the connection is the claim's until it has answered, whatever happened here
        existing = await claiming
    definition = definition or await definitions.get(tx, *found)  # pushed out of the cache meanwhile
    found = await pending(await tx.stack(stack_id, lock=True))
    if found is None:  # preempted again, or started by another engine, meanwhile
        return
    stack, template_id = found
    graph = await _lay_out(tx, stack, template_id, definition, existing)
    # Stored as a change of the newest graph (the traversals preempted since have none).
    await tx.start_traversal(stack_id, traversal, graph, previous=await tx.newest_graph(stack_id))
    await _trigger(tx, stack, traversal, graph, stack.action, fx)


async def _lay_out(
    tx: Tx,
    stack: StackRow,
    template_id: TemplateId,
    definition: StackDefinition,
    existing: Sequence[ResourceRow] | Sequence[RowLinks],
) -> dict[Node, GraphNode]:
    """Rows for the resources of `definition` the stack has none of yet, and the graph
    of a traversal to it from `existing` (the stack's claimed rows)."""
    current: dict[str, ResourceId] = {r.name: r.resource_id for r in existing if r.replaced_by is None}
    missing = [n for n in definition.resources if n not in current]
    new_ids = await tx.insert_resources(
        stack.stack_id,
        [
            (n, definition.resources[n].type, template_id, definition.resources[n].deletion_policy.value)
            for n in missing
        ],
    )
    current.update(zip(missing, new_ids, strict=True))
    await tx.set_goal_resources(stack.stack_id, len(definition.resources))  # the tree's size counts it
    with COLLECTOR.paused():  # a node or two per resource, all kept: no full collections meanwhile
        return traversal_graph(
            template_requires={n: r.requires for n, r in definition.resources.items()},
            current_rows={n: current[n] for n in definition.resources},
            existing=existing,
        )


async def begin_stack_action(
    tx: Tx,
    stack: StackRow,
    *,
    action: Action,
    fx: Effects,
    existing: list[ResourceRow],
    answers: Answers | None = None,
    ids: Ids,
) -> TraversalId:
    """Start a check, suspend, resume or snapshot: a traversal over the current resources
    that leaves the template as it is; each node runs `action` on its resource."""
    assert action in STACK_ACTIONS
    assert stack.current_template_id is not None
    traversal = ids.traversal()
    current = [r for r in existing if r.replaced_by is None]
    graph = action_graph(current, reverse=action is Action.SUSPEND)
    reason = f"Stack {action.value} started"
    template, previous = stack.current_template_id, stack.previous_template_id
    await _launch(tx, stack, traversal, graph, template, previous, action, reason, fx)
    if not graph and answers is not None:
        await answers.stack_ended(tx, _as(stack, action), Status.COMPLETE, _done(action), fx)
    return traversal


async def _launch(
    tx: Tx,
    stack: StackRow,
    traversal: TraversalId,
    graph: Mapping[Node, GraphNode],
    template_id: TemplateId,
    previous_template_id: TemplateId | None,
    action: Action,
    reason: str,
    fx: Effects,
    *,
    notes: Sequence[UncheckedValue] = (),
) -> None:
    """Store the graph, make `traversal` the stack's (preempting whatever ran) and
    trigger the leaves; an empty graph completes at once. Each of `notes` is an
    event of its own after the one saying the action started."""
    # Only what differs from the graph of the traversal it preempts is written.
    await tx.start_traversal(stack.stack_id, traversal, graph, previous=stack.current_traversal)
    await _announce(tx, stack, traversal, template_id, previous_template_id, action, reason, fx, notes)
    await _trigger(tx, stack, traversal, graph, action, fx)


async def _announce(
    tx: Tx,
    stack: StackRow,
    traversal: TraversalId,
    template_id: TemplateId,
    previous_template_id: TemplateId | None,
    action: Action,
    reason: str,
    fx: Effects,
    notes: Sequence[UncheckedValue],
) -> None:
    """Make `traversal` the stack's, running `action` towards `template_id`, and say so."""
    await tx.begin_operation(
        stack.stack_id,
        traversal=traversal,
        template_id=template_id,
        previous_template_id=previous_template_id,
        action=action,
        reason=reason,
    )
    fx.stack_event(stack, action.value, "IN_PROGRESS", reason)
    for note in notes:
        fx.stack_event(stack, action.value, "IN_PROGRESS", note.message())


async def _trigger(
    tx: Tx,
    stack: StackRow,
    traversal: TraversalId,
    graph: Mapping[Node, GraphNode],
    action: Action,
    fx: Effects,
) -> None:
    """Check the graph's leaves; an empty graph completes the operation at once."""
    for node in leaves(graph):
        fx.check(stack.stack_id, traversal, node, row_of(node))
    if not graph:
        done = _done(action)
        await tx.set_stack_status(
            stack.stack_id, traversal, Status.COMPLETE, done, deleted=action is Action.DELETE
        )
        fx.stack_event(stack, action.value, "COMPLETE", done)
        log.info("stack_complete", stack=stack.name, action=action.value)
    log.debug(
        "traversal_started",
        stack_id=str(stack.stack_id),
        action=action.value,
        traversal_id=str(traversal),
        nodes=len(graph),
    )


def _done(action: Action) -> str:
    return f"Stack {action.value} completed successfully"


def _as(stack: StackRow, action: Action) -> StackRow:
    """`stack` as its row now is: running `action`."""
    return dataclasses.replace(stack, action=action)


async def _restore_originals(tx: Tx, rows: list[ResourceRow], template_id: TemplateId) -> list[ResourceRow]:
    """Make an original current again where its replacement came after `template_id`
    (`core.node_checks.originals_to_restore`); the stack's rows, claimed again if any changed."""
    restored = originals_to_restore(rows, template_id)
    for original, row in restored:
        if not await tx.update_resource(original, ResourceChange(replaced_by=None)):
            raise ConflictError(f"resource {original.resource_id} changed while rolling back")
        if not await tx.update_resource(row, ResourceChange(replaced_by=original.resource_id)):
            raise ConflictError(f"resource {row.resource_id} changed while rolling back")
        log.info("original_restored", resource=row.name, original=original.resource_id)
    return await tx.claim_resources(rows[0].stack_id) if restored else rows


async def fail_or_roll_back(
    tx: Tx,
    stack: StackRow,
    traversal: TraversalId,
    reason: str,
    fx: Effects,
    *,
    definitions: DefinitionCache,
    force_rollback: bool = False,
    answers: Answers | None = None,
    ids: Ids,
) -> None:
    """The operation of `traversal` failed: roll back to the previous template,
    unless rollback is disabled (or this was a rollback or delete already). A
    child stack answers its parent's job once no rollback follows (or when the
    rollback ends)."""
    if not await tx.set_stack_status(stack.stack_id, traversal, Status.FAILED, reason):
        return  # a newer operation took over
    fx.stack_event(stack, stack.action.value, "FAILED", reason)
    log.info("stack_failed", stack=stack.name, action=stack.action.value, reason=reason)
    if not rolls_back(stack, forced=force_rollback):
        if answers is not None:
            await answers.stack_ended(tx, stack, Status.FAILED, reason, fx)
        return
    target = stack.previous_template_id
    if target is None:
        target = ids.template()
        await tx.insert_template(
            stack.stack_id,
            TemplateRecord(
                template_id=target, template=EMPTY_TEMPLATE, environment={}, files={}, parameters={}
            ),
        )
    definition = await definitions.get(tx, stack, target)
    await begin_traversal(
        tx,
        stack,
        template_id=target,
        definition=definition,
        action=Action.ROLLBACK,
        fx=fx,
        existing=await tx.claim_resources(stack.stack_id),
        reason=f"Rolling back: {reason}",
        answers=answers,
        ids=ids,
    )
