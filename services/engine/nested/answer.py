"""A child stack's operation ended: answer the parent's job (in the same transaction).

Where it sits: every place where a stack's operation ends — the last node
done (`convergence.propagation`), an empty graph (`traversal`), a failure without rollback
(`traversal.fail_or_roll_back`), a cancel (`operations`, `children`) — calls
`Answers.stack_ended` in the transaction that records the outcome. For a
child stack whose operation answers a parent job, it emits that job's
`JobResult` to the engine queue (outbox): physical id = the child's id,
attributes from the child's outputs (a group's from its members). The
parent's job id is taken off the child row as it is answered, so each job is
answered once; a job the parent no longer waits for is not answered at all.
The end of a SNAPSHOT action also ends its snapshot here (`snapshotting`).
An AutoScalingGroup's child update begun by a scaling signal answers no job:
its end gives the group its new attributes (`_rescaled`), or, when it failed,
makes the group UPDATE_FAILED with the child's reason.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import structlog

from services.engine.core.child_attributes import Member, child_attributes
from services.engine.core.model import Action, ResourceRow, StackRow, Status
from services.engine.core.nesting import MEMBER_GROUPS, SCALING_TYPE, is_nested, scaling_state
from services.engine.core.row_change import ResourceChange
from services.engine.definitions import DefinitionCache
from services.engine.effects import Effects
from services.engine.jobs import output_data
from services.engine.nested.messages import CancelNested
from services.engine.resolving import output_values
from services.engine.snapshotting import snapshot_ended
from services.engine.store.tx import Tx
from services.engine.template import StackDefinition
from services.engine.template_pool import INLINE, TemplateRunner
from shared.plugins import ResourceType
from shared.protocol import ENGINE_QUEUE, JobAction, JobOutcome, JobResult

log = structlog.get_logger(__name__)


class Answers:
    def __init__(
        self,
        *,
        definitions: DefinitionCache,
        types: Mapping[str, type[ResourceType]],
        templates: TemplateRunner = INLINE,
    ) -> None:
        self._definitions = definitions
        self._types = types
        self._templates = templates

    async def stack_ended(
        self,
        tx: Tx,
        stack: StackRow,
        status: Status,
        reason: str,
        fx: Effects,
        *,
        definition: StackDefinition | None = None,
    ) -> None:
        """`stack`'s operation ended with `status` (its row already says so). `definition`
        is its goal when the caller has it at hand. A SNAPSHOT action's snapshot ends
        with it (whether the stack is nested or not)."""
        if stack.action is Action.SNAPSHOT:
            await snapshot_ended(tx, stack.stack_id, stack.current_traversal, status, reason)
        if stack.owner_resource_id is None:
            return  # a top-level stack: nobody to answer
        job_id = await tx.take_owner_job(stack.stack_id)
        if job_id is None:  # answered already, or started directly (not by a parent job)
            await self._rescaled(tx, stack, status, reason, fx, definition)
            return
        row = await tx.resource(stack.owner_resource_id)
        if row is None or row.current_job != job_id or row.traversal_id is None:
            log.info("nested_answer_unwanted", child=str(stack.stack_id), job_id=job_id)
            return
        action = JobAction(row.action.value.lower())
        complete = status is Status.COMPLETE and stack.action is not Action.ROLLBACK
        if status is Status.COMPLETE and not complete:
            reason = f"the nested stack {stack.name} was rolled back"
        attributes: dict[str, Any] = {}
        if complete and action is not JobAction.DELETE:
            attributes = await self._attributes(tx, stack, row.type, definition)
        fx.emit(
            ENGINE_QUEUE,
            JobResult(
                id=f"{job_id}:nested",
                job_id=job_id,
                stack_id=str(row.stack_id),
                traversal_id=str(row.traversal_id),
                resource_id=row.resource_id,
                resource_name=row.name,
                action=action,
                outcome=JobOutcome.COMPLETE if complete else JobOutcome.FAILED,
                physical_id=str(stack.stack_id),
                attributes=attributes,
                reason="" if complete else reason,
                resource_type=row.type,
                project_id=stack.project_id,
            ),
        )
        log.info(
            "nested_answered",
            child=str(stack.stack_id),
            parent=str(row.stack_id),
            resource=row.name,
            job_id=job_id,
            outcome="complete" if complete else "failed",
        )

    async def _rescaled(
        self,
        tx: Tx,
        stack: StackRow,
        status: Status,
        reason: str,
        fx: Effects,
        definition: StackDefinition | None,
    ) -> None:
        """An AutoScalingGroup's child ended an update a scaling signal began: the group
        takes its new attributes (current_size, refs, ...), unless a newer signal has
        decided another size since (its own update will end later and refresh them) or
        the group's row changed meanwhile (its operation takes them)."""
        if status not in (Status.COMPLETE, Status.FAILED) or stack.action is not Action.UPDATE:
            return
        assert stack.owner_resource_id is not None
        row = await tx.resource(stack.owner_resource_id)
        if row is None or row.type != SCALING_TYPE or row.current_job is not None:
            return
        if status is Status.FAILED:
            await self._rescale_failed(tx, row, reason, fx)
            return
        attributes = await self._attributes(tx, stack, row.type, definition)
        decided, reached = scaling_state(row.attributes), scaling_state(attributes)
        if decided is not None and reached is not None and decided.size != reached.size:
            return
        change = ResourceChange(attributes=attributes)
        if row.status is Status.FAILED:  # a failed resize before; this one worked
            repaired = ResourceChange(
                action=Action.UPDATE, status=Status.COMPLETE, status_reason="state changed"
            )
            change |= repaired
        if not await tx.update_resource(row, change):
            log.info("scaled_attributes_skipped", resource=row.name)
            return
        size = attributes.get("current_size")
        fx.event(row.stack_id, row.name, row.physical_id, row.type, "SCALE", "COMPLETE", f"size {size}")

    async def _rescale_failed(self, tx: Tx, row: ResourceRow, why: str, fx: Effects) -> None:
        """A resize's child update failed: the group is UPDATE_FAILED with the child's reason
        (as Heat's), keeping the attributes of its last good size, so the stack shows it and
        the next stack update repairs the child (a failed nested resource is updated)."""
        reason = f"Resource UPDATE failed: {why or 'the nested stack failed'}"
        failed = ResourceChange(action=Action.UPDATE, status=Status.FAILED, status_reason=reason)
        if not await tx.update_resource(row, failed):
            log.info("scale_failure_skipped", resource=row.name)
            return
        log.info("scale_failed", resource=row.name, reason=reason)
        fx.event(row.stack_id, row.name, row.physical_id, row.type, "SCALE", "FAILED", reason)

    async def _attributes(
        self, tx: Tx, child: StackRow, owner_type: str, definition: StackDefinition | None
    ) -> dict[str, Any]:
        if definition is None:
            assert child.current_template_id is not None
            definition = await self._definitions.get(tx, child, child.current_template_id)
        rows = await tx.current_resources(child.stack_id, definition.resources)
        data = output_data(rows, self._types)
        members = (
            [Member(n, d.reference_id, d.attributes) for n, d in data.items() if d.error is None]
            if owner_type in MEMBER_GROUPS
            else []
        )
        return child_attributes(
            owner_type,
            child_id=str(child.stack_id),
            child_name=child.name,
            outputs=await output_values(self._templates, definition, data),
            members=members,
        )


def cancel_children(rows: Iterable[ResourceRow], fx: Effects) -> int:
    """Cancel the child operations that nested `rows` (of a stack being stopped) wait for."""
    count = 0
    for row in rows:
        if row.current_job is None or row.physical_id is None or not is_nested(row.type):
            continue
        try:
            child_id = uuid.UUID(row.physical_id)
        except ValueError:
            continue
        fx.emit(ENGINE_QUEUE, CancelNested(stack_id=child_id, job_id=row.current_job))
        count += 1
    return count
