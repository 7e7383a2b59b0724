"""Stack operations: create, update and delete are all updates to a goal.

An operation validates the new template before anything changes (parsing,
validating and evaluating it in the template pool, `goals.load_goal`, never
on the event loop), then in one transaction stores it, gives the stack a fresh traversal id (which alone
preempts any operation still running), creates rows for new resources,
stores the traversal graph computed from the template plus the existing rows
(`core.graph`), and queues checks for the graph's leaves. Delete is an
update to an empty template. An update (or its preview) that changes the value
of a parameter its template marks `immutable` is refused before anything
changes (`ImmutableParameterModified`, Heat's 400).

Tenant boundaries (`nested.claims`) are checked in that transaction before
anything is written: stack ids named for nested resources, the project's
stack quota and the tree's resource limit. Abandon releases the stack's
children, so its abandon data can adopt them again.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import structlog

from services.engine.core.decide import Forward, decide_forward
from services.engine.core.model import Action, ResourceRow, StackId, StackRow, Status, TemplateId, TraversalId
from services.engine.core.nesting import facade_of, goal_digest, is_nested, with_digest
from services.engine.core.quotas import DEFAULT_QUOTAS, Quotas
from services.engine.core.snapshots import stack_document
from services.engine.core.updates import UpdateSettings, settings_after
from services.engine.definitions import DefinitionCache, identity_of
from services.engine.effects import Effects
from services.engine.goals import Goal, GoalSpec, LoadedGoal, load_goal
from services.engine.jobs import reference_data
from services.engine.nested.answer import Answers, cancel_children
from services.engine.nested.children import stop_stack
from services.engine.nested.claims import admit_goal, admit_stack, check_external_ids, release
from services.engine.outbox import Outbox
from services.engine.resolving import goal_values
from services.engine.store import Store
from services.engine.store.tx import TemplateRecord, Tx
from services.engine.template import (
    DEFAULT_LIMITS,
    ResolutionError,
    StackDefinition,
    TemplateLimits,
)
from services.engine.template.custom_constraints import DEFAULT_CONSTRAINTS, CustomConstraints
from services.engine.template_pool import INLINE, TemplateRunner
from services.engine.traversal import EMPTY_TEMPLATE, begin_stack_action, begin_traversal, fail_or_roll_back
from shared.errors import ConflictError, InvalidInput, NotFound
from shared.plugins import ResourceType

log = structlog.get_logger(__name__)


class Refused(ConflictError):
    """The stack's state does not allow this operation now (not retried)."""


class StackExists(Refused):
    """A live stack of that name exists in the project."""


class NotCancellable(InvalidInput):
    """Only a create or update in progress can be cancelled."""


class StackNotFound(NotFound):
    """No such stack (or not visible to this project)."""


class ImmutableParameterModified(InvalidInput):
    """An update gives an `immutable: true` parameter another value (400, as Heat)."""

    def __init__(self, names: Sequence[str]) -> None:
        super().__init__("The following parameters are immutable and may not be updated: " + ", ".join(names))
        self.names = tuple(names)


class Operations:
    def __init__(
        self,
        *,
        store: Store,
        outbox: Outbox,
        definitions: DefinitionCache,
        types: Mapping[str, type[ResourceType]],
        limits: TemplateLimits = DEFAULT_LIMITS,
        quotas: Quotas = DEFAULT_QUOTAS,
        templates: TemplateRunner = INLINE,
        constraints: CustomConstraints = DEFAULT_CONSTRAINTS,
    ) -> None:
        self._constraints = constraints
        self._store = store
        self._outbox = outbox
        self._definitions = definitions
        self._types = types
        self._limits = limits
        self._quotas = quotas
        self._templates = templates
        self._answers = Answers(definitions=definitions, types=types, templates=templates)

    async def load(self, goal: Goal | GoalSpec, stack: StackRow) -> LoadedGoal:
        """Parse and validate `goal` in the template pool; raise `InvalidInput` (all
        template errors with their paths, or the limit it went past) before anything changes."""
        spec = goal if isinstance(goal, GoalSpec) else GoalSpec.of(goal)
        return await self._templates.run(
            load_goal, spec, identity_of(stack), self._types, self._limits, self._constraints
        )

    async def validate(self, goal: Goal | GoalSpec, stack: StackRow) -> StackDefinition:
        return (await self.load(goal, stack)).definition

    async def validate_new(self, goal: Goal | GoalSpec, draft: StackRow) -> StackDefinition:
        """`validate`, and refuse a nested `external_id` the new stack could not adopt."""
        definition = await self.validate(goal, draft)
        async with self._store.transaction() as tx:
            await check_external_ids(tx, draft, definition, {})
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
        stack_id = StackId(uuid.uuid4())
        draft = draft_stack(stack_id, project_id, name, disable_rollback, timeout_mins)
        loaded = await self.load(goal, draft)
        definition, goal = loaded.definition, loaded.goal
        adopt = {**loaded.adopt, **(adopt or {})}
        unknown = sorted(set(adopt or {}) - set(definition.resources))
        if unknown:
            raise InvalidInput(
                f"adopt_stack_data names resources the template does not have: {', '.join(unknown)}",
                path="adopt_stack_data.resources",
            )
        effects = Effects()
        async with self._store.transaction() as tx:
            targets = await admit_stack(
                tx,
                draft,
                definition,
                adopt or {},
                max_depth=self._limits.max_nested_depth,
                quotas=self._quotas,
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
            await self._begin(tx, draft, goal, definition, action, effects, [])
            adopted = dict(adopt or {})
            for row in await tx.resources(stack_id) if adopted else []:
                taken = {"physical_id": adopted.get(row.name), "action": Action.ADOPT}
                if row.name in adopted and not await tx.update_resource(row, **taken):
                    raise ConflictError(f"resource {row.name} changed while being adopted")
                if row.name in targets:  # checked and locked above: it becomes this row's child
                    owner = (stack_id, row.resource_id)
                    await tx.adopt_stack(targets[row.name].stack_id, owner=owner, depth=1, root=stack_id)
            ids = await effects.commit(tx)
        await self._outbox.publish(ids, effects.messages)
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
        return await _retrying(lambda: self._change(stack_id, goal, action, settings=settings, patch=patch))

    async def delete(self, stack_id: StackId) -> TraversalId:
        return await _retrying(lambda: self._change(stack_id, Goal(EMPTY_TEMPLATE), Action.DELETE))

    async def preview_update(
        self, stack_id: StackId, goal: Goal | GoalSpec
    ) -> tuple[dict[str, list[ResourceRow | str]], Goal]:
        """What an update to `goal` would do to each resource, without doing it:
        added / deleted / replaced / updated / unchanged (names for added ones), and
        the goal as parsed. A resource whose new properties depend on values not known
        yet (or too big to resolve here) counts as updated."""
        async with self._store.transaction() as tx:
            stack = await tx.stack(stack_id)
            if stack is None:
                raise StackNotFound(f"stack {stack_id} not found")
            rows = await tx.resources(stack_id)
        loaded = await self.load(goal, stack)
        definition = loaded.definition
        async with self._store.transaction() as tx:
            await self._refuse_immutable_changes(tx, stack, definition)
            current_ids = {r.name: r.resource_id for r in rows if r.replaced_by is None}
            await check_external_ids(tx, stack, definition, current_ids)
        current = {r.name: r for r in rows if r.replaced_by is None}
        data = {n: reference_data(r, self._types) for n, r in current.items() if r.exists}
        changes: dict[str, list[ResourceRow | str]] = {
            k: [] for k in ("added", "deleted", "replaced", "updated", "unchanged")
        }
        for name, goal_resource in definition.resources.items():
            row = current.get(name)
            if row is None or not row.exists:
                changes["added"].append(name)
                continue
            try:
                properties, metadata = await goal_values(self._templates, definition, name, data)
            except ResolutionError:
                changes["updated"].append(row)
                continue
            nested = is_nested(goal_resource.type)
            cls = self._types.get(goal_resource.type)
            if nested:  # as its check digests it (`checks`), what resource_facade gives included
                policy, updates = goal_resource.deletion_policy.value, goal_resource.update_policy
                facade = facade_of(metadata, policy, updates)
                properties = with_digest(
                    properties, goal_digest(loaded.goal.environment, loaded.goal.files, facade)
                )
            decision = decide_forward(
                row,
                type_name=goal_resource.type,
                schema=cls.properties if cls is not None else None,
                properties=properties,
                external_id=goal_resource.external_id,
                nested=nested,
                replaced_on_update=cls is not None and cls.replaced_on_update,  # by the new template
            )
            kind = {Forward.NOTHING: "unchanged", Forward.REPLACE: "replaced"}.get(decision.kind, "updated")
            changes[kind].append(row)
        changes["deleted"] = [r for n, r in current.items() if n not in definition.resources]
        return changes, loaded.goal

    async def stack_action(self, stack_id: StackId, action: Action) -> TraversalId:
        """Check, suspend or resume every current resource (see `begin_stack_action`)."""
        return await _retrying(lambda: self._stack_action(stack_id, action))

    async def _stack_action(self, stack_id: StackId, action: Action) -> TraversalId:
        effects = Effects()
        async with self._store.transaction() as tx:
            existing = await tx.claim_resources(stack_id)  # rows before the stack row, as checks do
            stack = await tx.stack(stack_id, lock=True)
            if stack is None:
                raise StackNotFound(f"stack {stack_id} not found")
            refusal = stack_action_refusal(stack, action)
            if refusal:
                raise Refused(refusal)
            traversal = await begin_stack_action(
                tx, stack, action=action, fx=effects, existing=existing, answers=self._answers
            )
            ids = await effects.commit(tx)
        await self._outbox.publish(ids, effects.messages)
        return traversal

    async def abandon(self, stack_id: StackId) -> dict[str, Any]:
        """Forget the stack, leaving its real resources in place; returns what
        `create(adopt=...)` needs to take them over again (Heat's abandon data)."""
        effects = Effects()
        async with self._store.transaction() as tx:
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
            traversal = TraversalId(uuid.uuid4())
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
            ids = await effects.commit(tx)
        await self._outbox.publish(ids, effects.messages)
        return data

    async def cancel(self, stack_id: StackId, *, rollback: bool) -> None:
        await _retrying(lambda: self._cancel(stack_id, rollback=rollback))

    async def _cancel(self, stack_id: StackId, *, rollback: bool) -> None:
        """Stop the operation in progress: roll back to the previous template, or stop
        where it is (FAILED, "cancelled"). Actions already running at workers finish
        and their outcomes are recorded; child stacks in progress are cancelled (and,
        with rollback, then converged back with their parent)."""
        effects = Effects()
        async with self._store.transaction() as tx:
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
                    definitions=self._definitions,
                    force_rollback=True,
                    answers=self._answers,
                )
            else:
                await stop_stack(tx, stack, rows, effects, answers=self._answers)
            ids = await effects.commit(tx)
        await self._outbox.publish(ids, effects.messages)

    async def _change(
        self,
        stack_id: StackId,
        goal: Goal | GoalSpec,
        action: Action,
        *,
        settings: UpdateSettings | None = None,
        patch: bool = False,
    ) -> TraversalId:
        async with self._store.transaction() as tx:
            stack = await tx.stack(stack_id)
        if stack is None:
            raise StackNotFound(f"stack {stack_id} not found")
        if action is Action.DELETE:  # the constant empty template: nothing a user controls
            spec = goal if isinstance(goal, GoalSpec) else GoalSpec.of(goal)
            loaded = load_goal(spec, identity_of(stack), self._types, self._limits)
        else:
            loaded = await self.load(goal, stack)
        definition, goal = loaded.definition, loaded.goal
        effects = Effects()
        async with self._store.transaction() as tx:
            existing = await tx.claim_resources(stack_id)  # rows before the stack row, as checks do
            locked = await tx.stack(stack_id, lock=True)  # orders concurrent operations on one stack
            if locked is None:
                raise StackNotFound(f"stack {stack_id} not found")
            if action is Action.UPDATE:
                await self._refuse_immutable_changes(tx, locked, definition)
            await admit_goal(tx, locked, definition, existing, quotas=self._quotas)
            if settings is not None:
                locked = await self._settle_settings(tx, locked, settings, patch=patch)
            traversal = await self._begin(tx, locked, goal, definition, action, effects, existing)
            if settings is not None and settings.converge:
                await tx.set_converge(traversal)  # each resource is observed before it is decided
            ids = await effects.commit(tx)
        await self._outbox.publish(ids, effects.messages)
        return traversal

    async def _refuse_immutable_changes(self, tx: Tx, stack: StackRow, definition: StackDefinition) -> None:
        """Heat's `immutable_params_modified`: a parameter both templates declare, immutable
        in the new one, whose value would change refuses the update before anything changes."""
        if stack.current_template_id is None:
            return
        current = await self._definitions.get(tx, stack, stack.current_template_id)
        changed = definition.immutable_violations(current)
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
        goal: Goal,
        definition: StackDefinition,
        action: Action,
        fx: Effects,
        existing: list[ResourceRow],
    ) -> TraversalId:
        template_id = TemplateId(uuid.uuid4())
        record = TemplateRecord(
            template_id, goal.template, goal.environment, goal.files, goal.parameters, goal.source
        )
        await tx.insert_template(stack.stack_id, record)
        self._definitions.put(template_id, definition)
        return await begin_traversal(
            tx,
            stack,
            template_id=template_id,
            definition=definition,
            action=action,
            fx=fx,
            existing=existing,
            answers=self._answers,
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


def draft_stack(
    stack_id: StackId, project_id: str, name: str, disable_rollback: bool, timeout_mins: int | None
) -> StackRow:
    """The row a new stack starts as (INIT), before anything is stored."""
    return StackRow(
        stack_id,
        project_id,
        name,
        Action.INIT,
        Status.COMPLETE,
        "",
        None,
        None,
        None,
        disable_rollback,
        timeout_mins,
    )


T = TypeVar("T")


async def _retrying(attempt: Callable[[], Awaitable[T]], *, tries: int = 5) -> T:
    """Run an operation again when it lost a race with a check (a conflict or deadlock)."""
    for remaining in range(tries - 1, -1, -1):
        try:
            return await attempt()
        except ConflictError as exc:
            if remaining == 0 or isinstance(exc, Refused):
                raise
            log.info("operation_retry", error=str(exc))
    raise AssertionError("unreachable")
