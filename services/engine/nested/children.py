"""Running a nested resource's job as an operation of its child stack (async shell).

Where it sits: `convergence.Convergence.handle` passes `NestedStackJob` and
`CancelNested` messages here, inside the transaction that claimed the message
(inbox) and that commits the effects (rows, events, outbox).

`start` runs the parent's job on the child, in one transaction: a create
makes the child stack row (recording its parent, the owning resource, the
depth and the tree's top, and the child's id as the resource's physical id);
the child is found again through `nested.claims.owned_child` every time, so a
physical id naming a stack the resource does not own (another project's, or
another resource's) is never acted on; every job sets the
child's `owner_job_id` to the job and begins the child's operation — update
to the goal `core.child_goals.child_goal` computes, delete, check, suspend or
resume — through the same traversal code as any stack, which preempts
whatever the child was doing. A job the parent no longer waits for is
dropped; one whose parent operation ended before it started is answered
FAILED. A child goal that is invalid, changes a parameter the child's
template marks `immutable` (Heat's ImmutableParameterModified), too deep, too
big (a group's `count`, the evaluation budget, the template pool's limits),
past the project's stack quota or past the tree's resource limit (`core.quotas`; counted under the
tree's lock, before any row is created) is answered FAILED with the reason,
naming the resource. The goal is computed, parsed and validated in the
template pool (`goals.load_child_goal`), off the event loop.

`rescale` updates an AutoScalingGroup's child to the size a scaling signal
recorded on the group (`services.engine.scaling`), answering no job.

`cancel` stops the child operation answering one job (as a cancel without
rollback does) and cancels its own children the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from services.engine.core.child_attributes import removed_names
from services.engine.core.child_goals import ChildGoal
from services.engine.core.model import (
    STACK_ACTIONS,
    Action,
    ResourceRow,
    StackId,
    StackRow,
    Status,
    TemplateId,
)
from services.engine.core.nesting import (
    GROUP_TYPE,
    SCALING_TYPE,
    NestedInvalid,
    child_name,
    facade_of,
    scaling_state,
)
from services.engine.core.node_checks import runs
from services.engine.core.quotas import stack_quota_message, tree_refusal
from services.engine.core.row_change import ResourceChange
from services.engine.core.sources import Ids
from services.engine.definitions import identity_of
from services.engine.deps import EngineDeps
from services.engine.effects import Effects
from services.engine.goals import load_child_goal
from services.engine.jobs import reference_data
from services.engine.nested.answer import Answers, cancel_children
from services.engine.nested.claims import owned_child
from services.engine.nested.messages import CancelNested, NestedStackJob
from services.engine.store.templates import TemplateRecord
from services.engine.store.tx import Tx
from services.engine.template import StackDefinition, load_stack
from services.engine.traversal import EMPTY_TEMPLATE, begin_stack_action, begin_traversal
from shared.errors import ConflictError, InvalidInput
from shared.protocol import ENGINE_QUEUE, JobAction, JobOutcome, JobResult

log = structlog.get_logger(__name__)


class Children:
    def __init__(self, deps: EngineDeps) -> None:
        self._deps = deps  # ids: child stacks', their templates' and traversals'

    # -- a parent job ----------------------------------------------------------

    async def start(self, tx: Tx, job: NestedStackJob, fx: Effects) -> None:
        row = await tx.resource(job.resource_id)
        if row is None or row.current_job != job.job_id:
            log.info("nested_job_superseded", job_id=job.job_id)
            return
        parent = await tx.stack(row.stack_id)
        if parent is None or row.traversal_id is None or not runs(parent, row.traversal_id):
            reason = "the parent's operation ended before the nested stack started"
            _answer(fx, parent, row, job, JobOutcome.FAILED, reason=reason)
            return
        child = await owned_child(tx, parent, row)
        if job.action is JobAction.DELETE:
            if child is None:
                _answer(fx, parent, row, job, JobOutcome.COMPLETE, physical_id=row.physical_id)
                return
            await self._delete(tx, child, job, fx)
        elif job.action in (JobAction.CHECK, JobAction.SUSPEND, JobAction.RESUME):
            if child is None or child.current_template_id is None:
                _answer(fx, parent, row, job, JobOutcome.FAILED, reason="the nested stack does not exist")
                return
            await self._stack_action(tx, child, job, fx)
        elif job.action is JobAction.SNAPSHOT:  # a child stack takes no snapshot of its own
            _answer(fx, parent, row, job, JobOutcome.COMPLETE, physical_id=row.physical_id)
        else:
            await self._converge(tx, parent, row, child, job, fx)

    async def rescale(self, tx: Tx, parent: StackRow, row: ResourceRow, fx: Effects) -> None:
        """Update the child of AutoScalingGroup `row` to the size its row now records (a
        scaling policy's signal decided it): as the group's own update would, answering
        no job, and preempting whatever the child was doing (so rapid signals converge on
        the last). Raises `InvalidInput` when the goal cannot be built, `ConflictError`
        when the child is not there yet."""
        child = await owned_child(tx, parent, row)
        if child is None or child.current_template_id is None:
            raise ConflictError(f"the nested stack of {row.name} does not exist yet")
        goal, template, definition = await self._goal(
            tx, parent, row, child, child, properties=row.properties or {}
        )
        refusal = await self._limit_refusal(tx, parent, child, len(definition.resources))
        if refusal is not None:
            raise InvalidInput(f"resource {row.name} of stack {parent.name} cannot scale: {refusal}")
        existing = await tx.claim_resources(child.stack_id)
        locked = await tx.stack(child.stack_id, lock=True)
        if locked is None:
            raise ConflictError(f"nested stack {child.stack_id} went away while scaling it")
        await tx.set_owner_job(child.stack_id, None)
        log.info("nested_rescale", child=str(child.stack_id), resource=row.name)
        template_id = await self._store_goal(
            tx, locked, definition, template, goal.environment, goal.parameters, goal.files
        )
        await begin_traversal(
            tx,
            locked,
            template_id=template_id,
            definition=definition,
            action=Action.UPDATE,
            fx=fx,
            existing=existing,
            answers=self._deps.answers,
            ids=self._deps.ids,
        )

    async def _claim(
        self, tx: Tx, child: StackRow, job: NestedStackJob
    ) -> tuple[StackRow, list[ResourceRow]]:
        """Lock the child as operations do (rows, then stack) and make it answer `job`."""
        existing = await tx.claim_resources(child.stack_id)
        locked = await tx.stack(child.stack_id, lock=True)
        if locked is None:
            raise ConflictError(f"nested stack {child.stack_id} went away while starting its operation")
        await tx.set_owner_job(child.stack_id, job.job_id)
        log.info("nested_operation", child=str(child.stack_id), action=job.action.value, job_id=job.job_id)
        return locked, existing

    async def _delete(self, tx: Tx, child: StackRow, job: NestedStackJob, fx: Effects) -> None:
        locked, existing = await self._claim(tx, child, job)
        deps = self._deps
        definition = load_stack(
            dict(EMPTY_TEMPLATE), types=deps.types, identity=identity_of(locked), limits=deps.limits
        )
        template_id = await self._store_goal(tx, locked, definition, EMPTY_TEMPLATE, {}, {}, {})
        await begin_traversal(
            tx,
            locked,
            template_id=template_id,
            definition=definition,
            action=Action.DELETE,
            fx=fx,
            existing=existing,
            answers=self._deps.answers,
            ids=self._deps.ids,
        )

    async def _stack_action(self, tx: Tx, child: StackRow, job: NestedStackJob, fx: Effects) -> None:
        locked, existing = await self._claim(tx, child, job)
        action = Action(job.action.value.upper())
        assert action in STACK_ACTIONS
        deps = self._deps
        await begin_stack_action(
            tx, locked, action=action, fx=fx, existing=existing, answers=deps.answers, ids=deps.ids
        )

    async def _converge(
        self,
        tx: Tx,
        parent: StackRow,
        row: ResourceRow,
        child: StackRow | None,
        job: NestedStackJob,
        fx: Effects,
    ) -> None:
        """Create the child, or update it, to the goal the resource's properties give."""
        depth = parent.nested_depth + 1
        if depth > self._deps.limits.max_nested_depth:
            reason = (
                f"resource {row.name} of stack {parent.name} would nest a stack at depth {depth}, "
                f"more than the maximum nested depth of {self._deps.limits.max_nested_depth} "
                "(CONVERGE_MAX_NESTED_DEPTH)"
            )
            _answer(fx, parent, row, job, JobOutcome.FAILED, reason=reason, physical_id=row.physical_id)
            return
        child_id = child.stack_id if child is not None else self._deps.ids.stack()
        draft = child or StackRow(
            stack_id=child_id,
            project_id=parent.project_id,
            name=child_name(parent.name, row.name, str(child_id)),
            action=Action.INIT,
            status=Status.COMPLETE,
            status_reason="",
            current_traversal=None,
            current_template_id=None,
            previous_template_id=None,
            disable_rollback=True,  # the parent rolls its children back
            owner_stack_id=parent.stack_id,
            owner_resource_id=row.resource_id,
            nested_depth=depth,
            root_stack_id=parent.root,
        )
        try:
            goal, template, definition = await self._goal(tx, parent, row, child, draft)
        except InvalidInput as exc:  # invalid, or past a limit: the resource fails, saying why
            reason = f"the nested stack of resource {row.name} is invalid: {exc}"
            _answer(fx, parent, row, job, JobOutcome.FAILED, reason=reason, physical_id=row.physical_id)
            return
        immutable = await self._immutable_refusal(tx, parent, child, definition)
        if immutable is not None:
            reason = f"the nested stack of resource {row.name} cannot be updated: {immutable}"
            _answer(fx, parent, row, job, JobOutcome.FAILED, reason=reason, physical_id=row.physical_id)
            return
        refusal = await self._limit_refusal(tx, parent, child, len(definition.resources))
        if refusal is not None:
            reason = f"resource {row.name} of stack {parent.name} cannot store its nested stack: {refusal}"
            _answer(fx, parent, row, job, JobOutcome.FAILED, reason=reason, physical_id=row.physical_id)
            return
        if child is None:
            if not await tx.insert_stack(
                child_id,
                project_id=draft.project_id,
                name=draft.name,
                disable_rollback=True,
                timeout_mins=goal.timeout_mins,
                tags=(),
                owner=(parent.stack_id, row.resource_id),
                nested_depth=depth,
                root_stack_id=parent.root,
            ):
                raise ConflictError(f"nested stack name {draft.name} is taken; will retry with another")
            if not await tx.update_resource(row, ResourceChange(physical_id=str(child_id))):
                raise ConflictError(f"resource {row.resource_id} changed while creating its nested stack")
            child = draft
        elif child.timeout_mins != goal.timeout_mins:
            await tx.set_timeout(child.stack_id, goal.timeout_mins)
        locked, existing = await self._claim(tx, child, job)
        template_id = await self._store_goal(
            tx, locked, definition, template, goal.environment, goal.parameters, goal.files
        )
        traversal = await begin_traversal(
            tx,
            locked,
            template_id=template_id,
            definition=definition,
            action=Action.CREATE if locked.action is Action.INIT else Action.UPDATE,
            fx=fx,
            existing=existing,
            answers=self._deps.answers,
            ids=self._deps.ids,
        )
        if row.traversal_id is not None and await tx.converges(row.traversal_id):
            await tx.set_converge(traversal)  # `converge: true` reaches the child's resources too

    async def _immutable_refusal(
        self, tx: Tx, parent: StackRow, child: StackRow | None, definition: StackDefinition
    ) -> str | None:
        """Heat's ImmutableParameterModified for a child: an update of the parent that
        would change a parameter the child's template marks `immutable` (None: it would not)."""
        if child is None or child.current_template_id is None or parent.action is not Action.UPDATE:
            return None
        current = await self._deps.definitions.get(tx, child, child.current_template_id)
        changed = definition.immutable_violations(current)
        if not changed:
            return None
        return "The following parameters are immutable and may not be updated: " + ", ".join(changed)

    async def _limit_refusal(
        self, tx: Tx, parent: StackRow, child: StackRow | None, resources: int
    ) -> str | None:
        """Why the child may not hold `resources` resources now (None: it may): the tree would
        grow past its limit, or a new child would take the project past its stack quota.
        The tree stays locked until the transaction ends, so concurrent children of one tree
        are counted one after another; the lock is taken before any row lock."""
        await tx.lock_tree(parent.root)
        count = await tx.tree_resources(parent.root, stack_id=child.stack_id if child else None)
        refusal = tree_refusal(self._deps.quotas, others=count.others, before=count.of_stack, after=resources)
        quota = self._deps.quotas.stacks_per_project
        if refusal is None and child is None and not await tx.reserve_stack(parent.project_id, quota):
            refusal = stack_quota_message(self._deps.quotas)
        return refusal

    async def _goal(
        self,
        tx: Tx,
        parent: StackRow,
        row: ResourceRow,
        child: StackRow | None,
        draft: StackRow,
        *,
        properties: Mapping[str, Any] | None = None,
    ) -> tuple[ChildGoal, dict[str, Any], StackDefinition]:
        """The child's goal, its template as a document, and its validated definition
        (from `properties`, by default those of the resource's job)."""
        template_id = row.job_template_id or parent.current_template_id
        record = await tx.template(template_id) if template_id is not None else None
        if record is None:
            raise NestedInvalid(f"the template of stack {parent.name} is missing")
        parent_definition = await self._deps.definitions.get(tx, parent, record.template_id)
        parent_goal = parent_definition.resources.get(row.name)
        facade = facade_of(
            await tx.resource_metadata(row.resource_id),
            row.deletion_policy,
            parent_goal.update_policy if parent_goal is not None else {},
        )
        members: dict[str, str] = {}
        failed: list[str] = []
        if row.type in (GROUP_TYPE, SCALING_TYPE) and child is not None:
            for member in await tx.resources(child.stack_id):
                ref = reference_data(member, self._deps.types).reference_id
                if member.replaced_by is None and ref is not None:
                    members[ref] = member.name
                if member.replaced_by is None and member.status is Status.FAILED:
                    failed.append(member.name)
        goal, definition = await self._deps.templates.run(
            load_child_goal,
            row.type,
            properties if properties is not None else (row.job_properties or {}),
            environment=record.environment,
            files=record.files,
            timeout_mins=parent.timeout_mins,
            members=members,
            removed=removed_names(row.attributes),
            identity=identity_of(draft),
            types=self._deps.types,
            limits=self._deps.limits,
            resource_name=row.name,
            facade=facade,
            constraints=self._deps.constraints,
            creating=child is None,
            scaling=scaling_state(row.attributes) if row.type == SCALING_TYPE else None,
            failed=failed,
        )
        assert isinstance(goal.template, dict)
        return goal, goal.template, definition

    async def _store_goal(
        self,
        tx: Tx,
        child: StackRow,
        definition: StackDefinition,
        template: Mapping[str, Any],
        environment: Mapping[str, Any],
        parameters: Mapping[str, Any],
        files: Mapping[str, str],
    ) -> TemplateId:
        template_id = self._deps.ids.template()
        record = TemplateRecord(
            template_id=template_id,
            template=template,
            environment=environment,
            files=files,
            parameters=parameters,
        )
        await tx.insert_template(child.stack_id, record)
        self._deps.definitions.put(template_id, definition)
        return template_id

    # -- cancel ---------------------------------------------------------------

    async def cancel(self, tx: Tx, msg: CancelNested, fx: Effects) -> None:
        """Stop the child operation answering `msg.job_id` (nothing if it moved on). Only a
        stack the job started answers it, so a stack id naming any other is left untouched:
        it is read before anything of it is locked."""

        def answering(child: StackRow | None) -> bool:
            return (
                child is not None and child.owner_job_id == msg.job_id and child.status is Status.IN_PROGRESS
            )

        if not answering(await tx.stack(StackId(msg.stack_id))):
            return
        rows = await tx.claim_resources(StackId(msg.stack_id))
        child = await tx.stack(StackId(msg.stack_id), lock=True)
        if child is None or not answering(child):
            return
        await stop_stack(tx, child, rows, fx, answers=self._deps.answers, ids=self._deps.ids)


async def stop_stack(
    tx: Tx, stack: StackRow, rows: list[ResourceRow], fx: Effects, *, answers: Answers | None, ids: Ids
) -> None:
    """End `stack`'s operation where it is (FAILED, cancelled) and cancel its children's.
    `rows` are its rows, claimed in this transaction."""
    reason = f"Stack {stack.action.value} cancelled"
    await tx.stop_operation(stack.stack_id, ids.traversal(), reason)
    fx.stack_event(stack, stack.action.value, "FAILED", reason)
    cancelled = cancel_children(rows, fx)
    if answers is not None:
        await answers.stack_ended(tx, stack, Status.FAILED, reason, fx)
    log.info("stack_cancelled", stack_id=str(stack.stack_id), children=cancelled)


def _answer(
    fx: Effects,
    parent: StackRow | None,
    row: ResourceRow,
    job: NestedStackJob,
    outcome: JobOutcome,
    *,
    reason: str = "",
    physical_id: str | None = None,
) -> None:
    """Answer the parent's job at once (nothing to run, or nothing can run)."""
    if outcome is JobOutcome.FAILED:
        log.warning("nested_job_failed", resource=row.name, reason=reason)
    fx.emit(
        ENGINE_QUEUE,
        JobResult(
            id=f"{job.job_id}:nested",
            job_id=job.job_id,
            stack_id=str(row.stack_id),
            traversal_id=str(row.traversal_id),
            resource_id=row.resource_id,
            resource_name=row.name,
            action=job.action,
            outcome=outcome,
            physical_id=physical_id,
            reason=reason,
            resource_type=row.type,
            project_id=parent.project_id if parent is not None else "",
        ),
    )
