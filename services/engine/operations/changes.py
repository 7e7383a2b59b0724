"""Stack operations: create, update and delete are all updates to a goal.

Where it sits: `Operations` is the one entry through which the API, snapshots
(restore), the tests and the bench start or stop a stack's operation; its
other operations — check, suspend, resume, cancel, abandon — are in
`operations.actions`, the preview of an update in `operations.preview`,
why an operation is refused in `operations.errors`.

An operation validates the new template before anything changes (parsing,
validating and evaluating it in the template pool, `goals.load_goal`, never
on the event loop). A create then, in one transaction, stores it, gives the
stack a traversal id, creates the rows, stores the traversal graph
(`core.graph`) and queues checks for the graph's leaves. An update or delete
preempts first: its transaction stores the template and gives the stack a
fresh traversal id (which alone preempts any operation still running, the
moment it commits) and queues the rest — the rows of new resources, the graph
from the template plus the existing rows, the leaves' checks — which this
engine then does (or, if it cannot, whichever engine the queued message
reaches: `traversal.preempt`, `traversal.start_reserved`). Delete is an
update to an empty template. An update (or its preview) that changes the value
of a parameter its template marks `immutable` is refused before anything
changes (`ImmutableParameterModified`, Heat's 400).

Tenant boundaries (`nested.claims`) are checked in that transaction before
anything is written: stack ids named for nested resources, the project's
stack quota and the tree's resource limit. Abandon releases the stack's
children, so its abandon data can adopt them again.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import structlog

from services.engine.core.model import (
    Action,
    ResourceRow,
    StackId,
    StackRow,
    Status,
    TemplateId,
    TraversalId,
)
from services.engine.core.row_change import ResourceChange
from services.engine.core.updates import UpdateSettings, settings_after
from services.engine.definitions import identity_of
from services.engine.deps import EngineDeps
from services.engine.effects import Effects
from services.engine.goals import (
    EncodedGoal,
    Goal,
    GoalSpec,
    LoadedGoal,
    external_refs,
    load_goal,
    prepare_create,
    prepare_update,
)
from services.engine.messages import StartTraversal
from services.engine.nested.claims import admit_goal, admit_stack, check_external_ids
from services.engine.operations.actions import abandon_stack, begin_action, cancel_operation
from services.engine.operations.errors import ImmutableParameterModified, Refused, StackExists, StackNotFound
from services.engine.operations.preview import resource_changes
from services.engine.store.tx import Tx
from services.engine.template import StackDefinition, StackIdentity, TemplateLimits
from services.engine.template.custom_constraints import CustomConstraints
from services.engine.template.definition import immutable_changes
from services.engine.template.stack import TypeTable
from services.engine.traversal import EMPTY_TEMPLATE, begin_traversal, preempt, start_reserved
from shared.errors import ConflictError, ConvergeError, InvalidInput
from shared.tasks import log_task_failure

log = structlog.get_logger(__name__)

T = TypeVar("T")
#: A goal's job in the template pool: `load_goal` and its `prepare_` forms take these.
GoalJob = Callable[[GoalSpec, StackIdentity, TypeTable, TemplateLimits, CustomConstraints], T]


class Operations:
    """Start and stop stack operations. Each writes in one transaction, then
    publishes what it queued; update, delete, the stack actions and cancel run
    again when they lose a race with a check (a conflict), unless refused."""

    def __init__(self, deps: EngineDeps) -> None:
        self._deps = deps  # ids: new stacks', templates' and traversals'
        self._starting: set[asyncio.Task[None]] = set()  # graphs being stored here (`_start_here`)

    async def load(self, goal: Goal | GoalSpec, stack: StackRow) -> LoadedGoal:
        """Parse and validate `goal` in the template pool; raise `InvalidInput` (all
        template errors with their paths, or the limit it went past) before anything changes."""
        return await self._in_pool(load_goal, goal, stack)

    async def _in_pool(self, job: GoalJob[T], goal: Goal | GoalSpec, stack: StackRow) -> T:
        """`job` (`load_goal`, or its form for a create or an update) on `goal`, in the pool."""
        spec = goal if isinstance(goal, GoalSpec) else GoalSpec.of(goal)
        d = self._deps
        return await d.templates.run(job, spec, identity_of(stack), d.types, d.limits, d.constraints)

    async def validate(self, goal: Goal | GoalSpec, stack: StackRow) -> StackDefinition:
        return (await self.load(goal, stack)).definition

    async def validate_new(self, goal: Goal | GoalSpec, draft: StackRow) -> StackDefinition:
        """`validate`, and refuse a nested `external_id` the new stack could not adopt."""
        definition = await self.validate(goal, draft)
        async with self._deps.store.transaction() as tx:
            await check_external_ids(tx, draft, external_refs(definition), {})
        return definition

    async def create(
        self,
        *,
        project_id: str,
        name: str,
        goal: Goal | GoalSpec,
        disable_rollback: bool = False,
        timeout_mins: int | None = None,
        tags: Sequence[str] = (),
        adopt: Mapping[str, str] | None = None,
    ) -> StackId:
        """Create a stack; with `adopt` (resource name -> physical id, from another
        stack's abandon data, or the goal's `adopt_stack_data`) those resources are
        taken over as they are, not created."""
        stack_id = self._deps.ids.stack()
        draft = draft_stack(stack_id, project_id, name, disable_rollback, timeout_mins)
        loaded = await self._in_pool(prepare_create, goal, draft)
        definition = loaded.definition
        adopt = {**loaded.adopt, **(adopt or {})}
        unknown = sorted(set(adopt or {}) - set(definition.resources))
        if unknown:
            raise InvalidInput(
                f"adopt_stack_data names resources the template does not have: {', '.join(unknown)}",
                path="adopt_stack_data.resources",
            )
        effects = Effects()
        async with self._deps.store.transaction() as tx:
            targets = await admit_stack(
                tx,
                draft,
                definition,
                adopt or {},
                max_depth=self._deps.limits.max_nested_depth,
                quotas=self._deps.quotas,
            )
            if not await tx.insert_stack(
                stack_id,
                project_id=project_id,
                name=name,
                disable_rollback=disable_rollback,
                timeout_mins=timeout_mins,
                tags=tags,
            ):
                raise StackExists(f"a stack named {name!r} already exists")
            action = Action.ADOPT if adopt else Action.CREATE
            await self._begin(tx, draft, loaded.goal, definition, action, effects, [])
            adopted = dict(adopt or {})
            for row in await tx.resources(stack_id) if adopted else []:
                taken = ResourceChange(physical_id=adopted.get(row.name), action=Action.ADOPT)
                if row.name in adopted and not await tx.update_resource(row, taken):
                    raise ConflictError(f"resource {row.name} changed while being adopted")
                if row.name in targets:  # checked and locked above: it becomes this row's child
                    owner = (stack_id, row.resource_id)
                    await tx.adopt_stack(targets[row.name].stack_id, owner=owner, depth=1, root=stack_id)
            ids = await effects.commit(tx)
        await self._deps.outbox.publish(ids, effects.messages)
        return stack_id

    async def update(
        self,
        stack_id: StackId,
        goal: Goal | GoalSpec,
        *,
        settings: UpdateSettings | None = None,
        patch: bool = False,
        action: Action = Action.UPDATE,
    ) -> TraversalId:
        """Converge the stack to `goal`. `settings` (the body's tags, timeout, rollback
        and converge flag) change the stack's own settings as Heat's update does, a PATCH
        (`patch`) keeping the tags it does not give (`core.updates.settings_after`)."""
        return await retrying(lambda: self._change(stack_id, goal, action, settings=settings, patch=patch))

    async def delete(self, stack_id: StackId) -> TraversalId:
        return await retrying(lambda: self._change(stack_id, Goal(EMPTY_TEMPLATE), Action.DELETE))

    async def preview_update(
        self, stack_id: StackId, goal: Goal | GoalSpec
    ) -> tuple[dict[str, list[ResourceRow | str]], Goal]:
        """What an update to `goal` would do to each resource, without doing it:
        added / deleted / replaced / updated / unchanged (names for added ones), and
        the goal as parsed. A resource whose new properties depend on values not known
        yet (or too big to resolve here) counts as updated."""
        async with self._deps.store.transaction() as tx:
            stack = await tx.stack(stack_id)
            if stack is None:
                raise StackNotFound(f"stack {stack_id} not found")
            rows = await tx.resources(stack_id)
        loaded = await self.load(goal, stack)
        definition = loaded.definition
        async with self._deps.store.transaction() as tx:
            await self._refuse_immutable_changes(tx, stack, definition.immutable_values())
            current_ids = {r.name: r.resource_id for r in rows if r.replaced_by is None}
            await check_external_ids(tx, stack, external_refs(definition), current_ids)
        changes = await resource_changes(
            rows, definition, loaded.goal, types=self._deps.types, templates=self._deps.templates
        )
        return changes, loaded.goal

    async def stack_action(self, stack_id: StackId, action: Action) -> TraversalId:
        """Check, suspend or resume every current resource (see `actions.begin_action`)."""
        return await retrying(lambda: self._stack_action(stack_id, action))

    async def _stack_action(self, stack_id: StackId, action: Action) -> TraversalId:
        effects = Effects()
        async with self._deps.store.transaction() as tx:
            traversal = await begin_action(
                tx, stack_id, action, effects, answers=self._deps.answers, ids=self._deps.ids
            )
            ids = await effects.commit(tx)
        await self._deps.outbox.publish(ids, effects.messages)
        return traversal

    async def abandon(self, stack_id: StackId) -> dict[str, Any]:
        """Forget the stack, leaving its real resources in place; returns what
        `create(adopt=...)` needs to take them over again (Heat's abandon data)."""
        return await retrying(lambda: self._abandon(stack_id))

    async def _abandon(self, stack_id: StackId) -> dict[str, Any]:
        effects = Effects()
        async with self._deps.store.transaction() as tx:
            data = await abandon_stack(tx, stack_id, effects, ids=self._deps.ids)
            ids = await effects.commit(tx)
        await self._deps.outbox.publish(ids, effects.messages)
        return data

    async def cancel(self, stack_id: StackId, *, rollback: bool) -> None:
        await retrying(lambda: self._cancel(stack_id, rollback=rollback))

    async def _cancel(self, stack_id: StackId, *, rollback: bool) -> None:
        """See `actions.cancel_operation`."""
        effects = Effects()
        async with self._deps.store.transaction() as tx:
            await cancel_operation(
                tx,
                stack_id,
                effects,
                rollback=rollback,
                definitions=self._deps.definitions,
                answers=self._deps.answers,
                ids=self._deps.ids,
            )
            ids = await effects.commit(tx)
        await self._deps.outbox.publish(ids, effects.messages)

    async def _change(
        self,
        stack_id: StackId,
        goal: Goal | GoalSpec,
        action: Action,
        *,
        settings: UpdateSettings | None = None,
        patch: bool = False,
    ) -> TraversalId:
        async with self._deps.store.transaction() as tx:
            stack = await tx.stack(stack_id)
        if stack is None:
            raise StackNotFound(f"stack {stack_id} not found")
        deps = self._deps
        if action is Action.DELETE:  # the constant empty template: nothing a user controls
            spec = goal if isinstance(goal, GoalSpec) else GoalSpec.of(goal)
            prepared = prepare_update(spec, identity_of(stack), deps.types, deps.limits)
        else:  # its definition comes back packed: unpickled once the request is answered
            prepared = await self._in_pool(prepare_update, goal, stack)
        effects = Effects()
        async with self._deps.store.transaction() as tx:
            # Orders concurrent operations on one stack, and waits for the commits of jobs
            # of the traversal it preempts (`Tx.confirm_traversals`).
            locked = await tx.stack(stack_id, lock=True)
            if locked is None:
                raise StackNotFound(f"stack {stack_id} not found")
            if action is Action.UPDATE:
                await self._refuse_immutable_changes(tx, locked, prepared.immutable)
            await admit_goal(tx, locked, prepared.external, prepared.resources, quotas=deps.quotas)
            if settings is not None:
                locked = await self._settle_settings(tx, locked, settings, patch=patch)
            template_id = await self._store_template(tx, locked, prepared.goal)
            deps.definitions.put_packed(template_id, prepared.packed)
            await tx.set_goal_resources(stack_id, prepared.resources)  # the tree's size counts it
            # Preempts whatever ran, from the commit on; the graph follows (`start_reserved`).
            start = await preempt(
                tx,
                locked,
                template_id=template_id,
                action=action,
                fx=effects,
                ids=self._deps.ids,
                notes=() if action is Action.DELETE else prepared.unchecked,
            )
            traversal = TraversalId(start.traversal_id)
            if settings is not None and settings.converge:
                await tx.set_converge(traversal)  # each resource is observed before it is decided
            (start_row,) = await effects.commit(tx)  # the StartTraversal's, the one message
        self._start_here(start, start_row)
        return traversal

    def _start_here(self, start: StartTraversal, outbox_id: int) -> None:
        """Store the new traversal's graph on this engine, which has its goal parsed, once
        the request is answered. The `StartTraversal` stays in the outbox meanwhile: if this
        engine dies first, or takes longer than the outbox's stale time, any engine's relay
        sends it and whichever engine takes it does the same (`traversal.start_reserved`)."""
        task = asyncio.create_task(self._start(start, outbox_id), name=f"start-{start.traversal_id}")
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)
        task.add_done_callback(log_task_failure)

    async def _start(self, start: StartTraversal, outbox_id: int) -> None:
        async def attempt() -> tuple[list[int], Effects]:
            effects = Effects()
            async with self._deps.store.transaction() as tx:
                await tx.take_outbox(outbox_id)
                if await tx.claim_message(start.id):  # a relayed copy is then a duplicate
                    await start_reserved(tx, start, effects, definitions=self._deps.definitions)
                return await effects.commit(tx), effects

        try:
            ids, effects = await retrying(attempt)
        except ConvergeError as exc:
            log.warning("start_left_to_the_outbox", traversal_id=str(start.traversal_id), error=str(exc))
            return
        await self._deps.outbox.publish(ids, effects.messages)

    async def stop(self) -> None:
        """Stop the graphs being stored here; their `StartTraversal`s are still in the outbox."""
        for task in list(self._starting):
            task.cancel()
        await asyncio.gather(*self._starting, return_exceptions=True)

    async def _refuse_immutable_changes(self, tx: Tx, stack: StackRow, immutable: Mapping[str, Any]) -> None:
        """Heat's `immutable_params_modified`: a parameter both templates declare, immutable
        in the new one (`immutable`: those, with their new values), whose value would
        change refuses the update before anything changes. A goal that declares none
        reads nothing (the current definition of a big stack may take a while to load)."""
        if not immutable or stack.current_template_id is None:
            return
        current = await self._deps.definitions.get(tx, stack, stack.current_template_id)
        changed = immutable_changes(immutable, current)
        if changed:
            raise ImmutableParameterModified(changed)

    async def _settle_settings(
        self, tx: Tx, stack: StackRow, settings: UpdateSettings, *, patch: bool
    ) -> StackRow:
        """Store the tags, timeout and rollback setting the update leaves; the stack as it is then."""
        current = await tx.stack_settings(stack.stack_id)
        if current is None:
            raise StackNotFound(f"stack {stack.stack_id} not found")
        after = settings_after(settings, current, patch=patch)
        if after != current:
            await tx.set_stack_settings(stack.stack_id, after)
        return dataclasses.replace(
            stack, timeout_mins=after.timeout_mins, disable_rollback=after.disable_rollback
        )

    async def _begin(
        self,
        tx: Tx,
        stack: StackRow,
        goal: EncodedGoal,
        definition: StackDefinition,
        action: Action,
        fx: Effects,
        existing: list[ResourceRow],
    ) -> TraversalId:
        template_id = await self._store_template(tx, stack, goal)
        self._deps.definitions.put(template_id, definition)
        return await begin_traversal(
            tx,
            stack,
            template_id=template_id,
            definition=definition,
            action=action,
            fx=fx,
            existing=existing,
            answers=self._deps.answers,
            ids=self._deps.ids,
        )

    async def _store_template(self, tx: Tx, stack: StackRow, goal: EncodedGoal) -> TemplateId:
        """Store `goal` (encoded in the template pool) as a new template of the stack."""
        template_id = self._deps.ids.template()
        await tx.insert_encoded_template(
            stack.stack_id,
            template_id,
            template=goal.template,
            environment=goal.environment,
            files=goal.files,
            parameters=goal.parameters,
            source=goal.source,
        )
        return template_id


def draft_stack(
    stack_id: StackId, project_id: str, name: str, disable_rollback: bool, timeout_mins: int | None
) -> StackRow:
    """The row a new stack starts as (INIT), before anything is stored."""
    return StackRow(
        stack_id=stack_id,
        project_id=project_id,
        name=name,
        action=Action.INIT,
        status=Status.COMPLETE,
        status_reason="",
        current_traversal=None,
        current_template_id=None,
        previous_template_id=None,
        disable_rollback=disable_rollback,
        timeout_mins=timeout_mins,
    )


async def retrying(attempt: Callable[[], Awaitable[T]], *, tries: int = 5) -> T:
    """Run an operation again when it lost a race with a check (a conflict or deadlock);
    a refusal (`Refused`) is final."""
    for remaining in range(tries - 1, -1, -1):
        try:
            return await attempt()
        except ConflictError as exc:
            if remaining == 0 or isinstance(exc, Refused):
                raise
            log.info("operation_retry", error=str(exc))
    raise AssertionError("unreachable")
