"""Starting a traversal, and what a failed one turns into (rollback or FAILED).

Where it sits: `operations` starts traversals for create/update/delete;
`convergence` calls `fail_or_roll_back` when a resource fails or the stack times
out, and `operations` when an update is cancelled. Starting a traversal is
one transaction: new rows for new resources, the graph (`core.graph`), the
stack's fresh traversal id (which alone preempts whatever was running) and
checks for the graph's leaves.

Rollback converges back to the previous template (nothing, after a failed
create); an operation towards the template the stack already had (a heal)
is not rolled back. A resource that was replaced during the failed operation and whose
original still exists is restored by making the original current again: no
third copy is created, and its dependents move back to it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from services.engine.core.graph import action_graph, leaves, traversal_graph
from services.engine.core.model import (
    STACK_ACTIONS,
    Action,
    GraphNode,
    Node,
    ResourceId,
    ResourceRow,
    StackRow,
    Status,
    TemplateId,
    TraversalId,
)
from services.engine.core.model import resource_of as row_of
from services.engine.core.row_change import ResourceChange
from services.engine.core.sources import Ids
from services.engine.definitions import DefinitionCache
from services.engine.effects import Effects
from services.engine.nested.answer import Answers
from services.engine.store.templates import TemplateRecord
from services.engine.store.tx import Tx
from services.engine.template import StackDefinition, UncheckedValue
from shared.errors import ConflictError

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
    graph = traversal_graph(
        template_requires={n: r.requires for n, r in definition.resources.items()},
        current_rows={n: current[n] for n in definition.resources},
        existing=existing,
    )
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
    """Make an original current again where its replacement came after `template_id`."""
    by_id = {r.resource_id: r for r in rows}
    for row in rows:
        original = by_id.get(row.replaces) if row.replaces is not None else None
        if (
            row.replaced_by is None
            and original is not None
            and original.replaced_by == row.resource_id
            and original.template_id == template_id
            and original.exists
            and original.current_job is None  # not being deleted already
            and original.status is Status.COMPLETE
        ):
            if not await tx.update_resource(original, ResourceChange(replaced_by=None)):
                raise ConflictError(f"resource {original.resource_id} changed while rolling back")
            if not await tx.update_resource(row, ResourceChange(replaced_by=original.resource_id)):
                raise ConflictError(f"resource {row.resource_id} changed while rolling back")
            log.info("original_restored", resource=row.name, original=original.resource_id)
    return await tx.claim_resources(rows[0].stack_id) if rows else rows


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
    # A heal converges to the template the stack already has: rolling it back would
    # only repeat it (healing retries it later, with backoff).
    repeat = (
        stack.previous_template_id is not None and stack.previous_template_id == stack.current_template_id
    )
    rollable = stack.action in (Action.CREATE, Action.UPDATE) and not repeat
    if not rollable or (stack.disable_rollback and not force_rollback):
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
