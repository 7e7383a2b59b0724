"""Stack operations: create, update and delete are all updates to a goal.

An operation validates the new template before anything changes, then in
one transaction stores it, gives the stack a fresh traversal id (which alone
preempts any operation still running), creates rows for new resources,
stores the traversal graph computed from the template plus the existing rows
(`core.graph`), and queues checks for the graph's leaves. Delete is an
update to an empty template.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from services.engine.core.graph import leaves, traversal_graph
from services.engine.core.model import Action, ResourceId, StackId, StackRow, Status, TemplateId, TraversalId
from services.engine.core.model import resource_of as row_of
from services.engine.definitions import DefinitionCache, identity_of
from services.engine.effects import Effects
from services.engine.outbox import Outbox
from services.engine.store import Store
from services.engine.store.tx import TemplateRecord, Tx
from services.engine.template import DEFAULT_LIMITS, StackDefinition, TemplateLimits, load_stack
from shared.errors import ConflictError, NotFound
from shared.plugins import ResourceType

log = structlog.get_logger(__name__)

EMPTY_TEMPLATE: Mapping[str, Any] = {"heat_template_version": "2013-05-23", "resources": {}}


class StackExists(ConflictError):
    """A live stack of that name exists in the project."""


class StackNotFound(NotFound):
    """No such stack (or not visible to this project)."""


@dataclass(frozen=True)
class Goal:
    """What the user asked for: a template and its inputs."""

    template: Mapping[str, Any]
    environment: Mapping[str, Any] = field(default_factory=dict)
    parameters: Mapping[str, Any] = field(default_factory=dict)
    files: Mapping[str, str] = field(default_factory=dict)


class Operations:
    def __init__(
        self,
        *,
        store: Store,
        outbox: Outbox,
        definitions: DefinitionCache,
        types: Mapping[str, type[ResourceType]],
        limits: TemplateLimits = DEFAULT_LIMITS,
    ) -> None:
        self._store = store
        self._outbox = outbox
        self._definitions = definitions
        self._types = types
        self._limits = limits

    def validate(self, goal: Goal, stack: StackRow) -> StackDefinition:
        """Raise `TemplateInvalid` (all errors, with paths) before anything changes."""
        return load_stack(
            dict(goal.template),
            environment=dict(goal.environment),
            parameters=dict(goal.parameters),
            files=dict(goal.files),
            types=self._types,
            identity=identity_of(stack),
            limits=self._limits,
        )

    async def create(
        self,
        *,
        project_id: str,
        name: str,
        goal: Goal,
        disable_rollback: bool = False,
        timeout_mins: int | None = None,
        tags: Sequence[str] = (),
    ) -> StackId:
        stack_id = StackId(uuid.uuid4())
        draft = StackRow(
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
        definition = self.validate(goal, draft)
        effects = Effects()
        async with self._store.transaction() as tx:
            if not await tx.insert_stack(
                stack_id,
                project_id=project_id,
                name=name,
                disable_rollback=disable_rollback,
                timeout_mins=timeout_mins,
                tags=tags,
            ):
                raise StackExists(f"a stack named {name!r} already exists")
            await self._begin(tx, draft, goal, definition, Action.CREATE, effects)
            ids = await effects.commit(tx)
        await self._outbox.publish(ids, effects.messages)
        return stack_id

    async def update(self, stack_id: StackId, goal: Goal) -> TraversalId:
        return await self._change(stack_id, goal, Action.UPDATE)

    async def delete(self, stack_id: StackId) -> TraversalId:
        return await self._change(stack_id, Goal(EMPTY_TEMPLATE), Action.DELETE)

    async def _change(self, stack_id: StackId, goal: Goal, action: Action) -> TraversalId:
        async with self._store.transaction() as tx:
            stack = await tx.stack(stack_id)
        if stack is None:
            raise StackNotFound(f"stack {stack_id} not found")
        definition = self.validate(goal, stack)
        effects = Effects()
        async with self._store.transaction() as tx:
            locked = await tx.stack(stack_id, lock=True)  # orders concurrent operations on one stack
            if locked is None:
                raise StackNotFound(f"stack {stack_id} not found")
            traversal = await self._begin(tx, locked, goal, definition, action, effects)
            ids = await effects.commit(tx)
        await self._outbox.publish(ids, effects.messages)
        return traversal

    async def _begin(
        self, tx: Tx, stack: StackRow, goal: Goal, definition: StackDefinition, action: Action, fx: Effects
    ) -> TraversalId:
        traversal = TraversalId(uuid.uuid4())
        template_id = TemplateId(uuid.uuid4())
        record = TemplateRecord(template_id, goal.template, goal.environment, goal.files, goal.parameters)
        await tx.insert_template(stack.stack_id, record)
        self._definitions.put(template_id, definition)
        existing = await tx.resources(stack.stack_id)
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
        graph = traversal_graph(
            template_requires={n: r.requires for n, r in definition.resources.items()},
            current_rows={n: current[n] for n in definition.resources},
            existing=existing,
        )
        await tx.start_traversal(stack.stack_id, traversal, graph)
        reason = f"Stack {action.value} started"
        await tx.begin_operation(
            stack.stack_id,
            traversal=traversal,
            template_id=template_id,
            previous_template_id=stack.current_template_id,
            action=action,
            reason=reason,
        )
        fx.stack_event(stack, action.value, "IN_PROGRESS", reason)
        for node in leaves(graph):
            fx.check(stack.stack_id, traversal, node, row_of(node))
        if not graph:
            done = f"Stack {action.value} completed successfully"
            await tx.set_stack_status(
                stack.stack_id, traversal, Status.COMPLETE, done, deleted=action is Action.DELETE
            )
            fx.stack_event(stack, action.value, "COMPLETE", done)
        log.info(
            "operation_started",
            stack_id=str(stack.stack_id),
            action=action.value,
            traversal_id=str(traversal),
            nodes=len(graph),
        )
        return traversal
