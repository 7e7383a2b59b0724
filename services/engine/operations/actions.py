"""Operations that keep a stack's goal: check, suspend, resume, cancel, abandon.

Where it sits: `Operations.stack_action`, `Operations.cancel` and
`Operations.abandon` (`operations.changes`) open the transaction and commit
and publish what these leave in the effects; each function here locks the
stack (its resource rows first, as checks do), refuses an operation its
state does not allow (`stack_action_refusal`, `NotCancellable`, `Refused`)
before anything is written, and then:

- check, suspend, resume: begins a traversal over every current resource
  (`traversal.begin_stack_action`);
- cancel: rolls back to the previous template, or stops where it is
  (FAILED, "cancelled"); child stacks in progress are cancelled too;
- abandon: forgets the stack and its rows, leaving the real resources in
  place, releases its children (free to be adopted again), and returns
  Heat's abandon data, which `Operations.create(adopt=...)` reads back.
"""

from __future__ import annotations

from typing import Any

from services.engine.core.model import Action, StackId, StackRow, Status, TraversalId
from services.engine.core.nesting import is_nested
from services.engine.core.snapshots import stack_document
from services.engine.core.sources import Ids
from services.engine.definitions import DefinitionCache
from services.engine.effects import Effects
from services.engine.nested.answer import Answers, cancel_children
from services.engine.nested.children import stop_stack
from services.engine.nested.claims import release
from services.engine.operations.errors import NotCancellable, Refused, StackNotFound
from services.engine.store.tx import Tx
from services.engine.traversal import begin_stack_action, fail_or_roll_back
from shared.errors import ConflictError


async def begin_action(
    tx: Tx, stack_id: StackId, action: Action, effects: Effects, *, answers: Answers, ids: Ids
) -> TraversalId:
    """Check, suspend or resume every current resource of the stack (see `begin_stack_action`)."""
    await tx.announce_claim(stack_id)  # batches leave its rows alone meanwhile
    existing = await tx.claim_resources(stack_id)  # rows before the stack row, as checks do
    stack = await tx.stack(stack_id, lock=True)
    if stack is None:
        raise StackNotFound(f"stack {stack_id} not found")
    refusal = stack_action_refusal(stack, action)
    if refusal:
        raise Refused(refusal)
    return await begin_stack_action(
        tx, stack, action=action, fx=effects, existing=existing, answers=answers, ids=ids
    )


def stack_action_refusal(stack: StackRow, action: Action) -> str | None:
    """Why `action` (check, suspend, resume) cannot start on `stack` now; None if it can."""
    state = f"{stack.action.value}_{stack.status.value}"
    if stack.status is Status.IN_PROGRESS:
        return f"stack {stack.name} is {state}: wait for it to finish or cancel it first"
    if stack.current_template_id is None:
        return f"stack {stack.name} has no template yet"
    resumable = stack.action is Action.SUSPEND or (
        stack.action is Action.RESUME and stack.status is Status.FAILED
    )
    if action is Action.RESUME and not resumable:
        return f"stack {stack.name} is {state}, not suspended: only a suspended stack can be resumed"
    return None


async def cancel_operation(
    tx: Tx,
    stack_id: StackId,
    effects: Effects,
    *,
    rollback: bool,
    definitions: DefinitionCache,
    answers: Answers,
    ids: Ids,
) -> None:
    """Stop the operation in progress: roll back to the previous template, or stop
    where it is (FAILED, "cancelled"). Actions already running at workers finish
    and their outcomes are recorded; child stacks in progress are cancelled (and,
    with rollback, then converged back with their parent)."""
    await tx.announce_claim(stack_id)  # batches leave its rows alone meanwhile
    rows = await tx.claim_resources(stack_id)  # rows before the stack row, as checks do
    stack = await tx.stack(stack_id, lock=True)
    if stack is None:
        raise StackNotFound(f"stack {stack_id} not found")
    if stack.status is not Status.IN_PROGRESS or stack.action not in (Action.CREATE, Action.UPDATE):
        state = f"{stack.action.value}_{stack.status.value}"
        raise NotCancellable(f"Cancelling update when stack is {state} is not supported")
    assert stack.current_traversal is not None
    reason = f"Stack {stack.action.value} cancelled"
    if rollback:
        cancel_children(rows, effects)
        await fail_or_roll_back(
            tx,
            stack,
            stack.current_traversal,
            reason,
            effects,
            definitions=definitions,
            force_rollback=True,
            answers=answers,
            ids=ids,
        )
    else:
        await stop_stack(tx, stack, rows, effects, answers=answers, ids=ids)


async def abandon_stack(tx: Tx, stack_id: StackId, effects: Effects, *, ids: Ids) -> dict[str, Any]:
    """Forget the stack, leaving its real resources in place; returns what
    `create(adopt=...)` needs to take them over again (Heat's abandon data)."""
    await tx.announce_claim(stack_id)  # batches leave its rows alone meanwhile
    rows = await tx.claim_resources(stack_id)
    stack = await tx.stack(stack_id, lock=True)
    if stack is None:
        raise StackNotFound(f"stack {stack_id} not found")
    if stack.status is Status.IN_PROGRESS or stack.current_template_id is None:
        state = f"{stack.action.value}_{stack.status.value}"
        raise Refused(f"stack {stack.name} is {state}: abandon it once the operation has ended")
    record = await tx.template(stack.current_template_id)
    assert record is not None
    settings = await tx.stack_settings(stack_id)
    data = stack_document(  # Heat's abandon data, as `create(adopt=...)` reads it back
        stack,
        template=record.template,
        environment=record.environment,
        files=record.files,
        parameters=record.parameters,
        tags=settings.tags if settings is not None else (),
        rows=rows,
        metadata=await tx.resources_metadata(stack_id),
    )
    for row in rows:
        if is_nested(row.type):  # left in place too, free to be adopted again
            await release(tx, stack, row)
        if not await tx.delete_resource(row):
            raise ConflictError(f"resource {row.resource_id} changed while abandoning")
    reason = "Stack abandoned: its resources were left in place"
    traversal = ids.traversal()
    await tx.begin_operation(
        stack_id,
        traversal=traversal,
        template_id=stack.current_template_id,
        previous_template_id=stack.previous_template_id,
        action=Action.DELETE,
        reason=reason,
    )
    await tx.set_stack_status(stack_id, traversal, Status.COMPLETE, reason, deleted=True)
    effects.stack_event(stack, Action.DELETE.value, "COMPLETE", reason)
    return data
