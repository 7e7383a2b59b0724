"""Handling the engine queue: node checks and job results (the async shell).

For every message: one transaction that claims the message id (inbox, so a
redelivery changes nothing), reads the few rows the decision needs, applies
the pure decision from `core.decide`, and writes rows, events and outgoing
messages (outbox) together; the outbox is published after commit. Node
checks and job results usually come in batches (`handle_batch`, fed by
`batching`): one transaction for the batch, its ids claimed and its rows read
in one statement each (`store.prefetch`), each message decided in turn as it
would be alone, its finished nodes settled once at the end (`settle`: the
sync points they made ready, and the traversal's end when its last sinks are
done), one outbox write and one publish. A check
whose values need the template pool (yaql on an attribute) never waits for
it in the transaction: it is rolled back, the values are resolved, and the
message is handled again (`resolving.Resolved`).

A check whose traversal id is no longer the stack's stops quietly: that is
how a newer operation preempts an older one without a lock. A check that
finds an older job still running on its row waits on the row and is
triggered again when that job's outcome is recorded.

A failed action leaves the row what deleting the real resource needs (the
properties it was made with). In a stack `check`, a resource that fails its
check does not stop the others: every resource is checked, one found gone is
recorded missing (no physical id, so the next update creates it again), and
the stack ends CHECK_FAILED naming them.

Adoption: a nested resource adopts the stack its `external_id` names only
if `nested.claims` allows it (same project, owned by no one), otherwise the
resource fails with the reason and the stack named is not touched. A row
adopted through `external_id` is remembered as external: when it leaves its
stack it is let go of (the row forgotten, a child stack released), never
deleted.

Restricted actions: a forward node whose decision is an update or a
replacement the environment's `restricted_actions` forbid fails the stack
(Heat's `ResourceActionRestricted`) without touching the row.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from services.engine.configs import DEFAULT_CONFIG_BYTES, is_config_type, reap_config, run_config_job
from services.engine.core.decide import (
    Cleanup,
    Forward,
    check_failure_reason,
    decide_cleanup,
    decide_forward,
    failure_reason,
    properties_after_failure,
    restricted_action,
    restricted_failure,
    restricted_reason,
)
from services.engine.core.drift import missing_marks
from services.engine.core.model import (
    Action,
    Node,
    ResourceId,
    ResourceRow,
    StackId,
    StackRow,
    Status,
    TraversalId,
    forward,
    is_forward,
    resource_of,
)
from services.engine.core.nesting import facade_of, goal_digest, is_nested, with_digest
from services.engine.core.quotas import DEFAULT_QUOTAS, Quotas
from services.engine.definitions import DefinitionCache
from services.engine.deployments import preempted
from services.engine.effects import Effects, Finished
from services.engine.gates import Gates
from services.engine.jobs import deadline_for, job_for, reference_data
from services.engine.messages import CheckResource
from services.engine.nested.answer import Answers, cancel_children
from services.engine.nested.children import Children
from services.engine.nested.claims import release, take_over
from services.engine.nested.messages import CancelNested, NestedStackJob
from services.engine.outbox import Outbox
from services.engine.resolving import Resolved, ValuesNeeded
from services.engine.signals import CONDITION, condition_result
from services.engine.snapshotting import job_ended, takes_snapshots
from services.engine.store import Store
from services.engine.store.tx import Tx
from services.engine.template import (
    DEFAULT_CONSTRAINTS,
    DEFAULT_LIMITS,
    CustomConstraints,
    ResolutionError,
    TemplateLimits,
)
from services.engine.template_pool import INLINE, TemplateRunner
from services.engine.traversal import STACK_ACTIONS, fail_or_roll_back
from shared.bus import Delivery
from shared.errors import ConflictError
from shared.messages import Message
from shared.plugins import ResourceType
from shared.protocol import (
    ENGINE_QUEUE,
    JOBS_QUEUE,
    OBSERVE_QUEUE,
    JobAction,
    JobOutcome,
    JobResult,
    ObserveRequest,
    ResourceJob,
)

log = structlog.get_logger(__name__)

CHANGES = frozenset({JobAction.CREATE, JobAction.UPDATE})  # actions whose result replaces attributes


class Convergence:
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
        config_bytes: int = DEFAULT_CONFIG_BYTES,
    ) -> None:
        self._store = store
        self._outbox = outbox
        self._definitions = definitions
        self._types = types
        self._config_bytes = config_bytes  # largest config a config resource stores
        self._limits = limits
        self._quotas = quotas
        self._templates = templates
        self._answers = Answers(definitions=definitions, types=types, templates=templates)
        # Hooks and converge's observations, between a node's decision and its action.
        self.gates = Gates(store=store, outbox=outbox, definitions=definitions, types=types)
        self.children = self._children = Children(
            definitions=definitions,
            types=types,
            answers=self._answers,
            limits=limits,
            quotas=quotas,
            templates=templates,
            constraints=constraints,
        )

    async def handle(self, message: Message, delivery: Delivery) -> None:
        context = _context(message)
        with structlog.contextvars.bound_contextvars(**context):
            resolved = Resolved()
            while True:
                try:
                    await self._handle_once(message, resolved)
                    return
                except ValuesNeeded as need:  # rolled back: resolve off the loop, then again
                    await resolved.resolve(self._templates, need)

    async def handle_batch(self, messages: Sequence[CheckResource | JobResult]) -> None:
        """Handle node checks and job results together: one transaction (claimed in one
        statement, decided one after the other as `handle` would, settled once), one
        outbox write and one publish for the batch. Raises whatever one of them
        raises (a conflict, values the template pool must resolve first, ...), with
        nothing committed: the caller then handles each message alone (`handle`)."""
        effects = Effects()
        async with self._store.transaction() as tx:
            fresh = await tx.claim_messages([m.id for m in messages])
            todo = [m for m in messages if m.id in fresh]
            checks = [m for m in todo if isinstance(m, CheckResource)]
            await tx.prefetch(
                resources=[m.resource_id for m in todo],
                stacks=[StackId(m.stack_id) for m in checks],
                nodes=[(TraversalId(m.traversal_id), Node(m.node)) for m in checks],
            )
            for message in messages:
                if message.id not in fresh:
                    log.debug("duplicate_message", message_id=message.id)
                    continue
                fresh.discard(message.id)  # the same message twice in one batch: once
                with structlog.contextvars.bound_contextvars(**_context(message)):
                    if isinstance(message, CheckResource):
                        await self._check(tx, message, effects, Resolved())
                    else:
                        await self._result(tx, message, effects)
            await self.settle(tx, effects)
            ids = await effects.commit(tx)
        await self._outbox.publish(ids, effects.messages)

    async def _handle_once(self, message: Message, resolved: Resolved) -> None:
        effects = Effects()
        async with self._store.transaction() as tx:
            if not await tx.claim_message(message.id):
                log.debug("duplicate_message", message_id=message.id)
                return
            if isinstance(message, CheckResource):
                await self._check(tx, message, effects, resolved)
            elif isinstance(message, JobResult):
                await self._result(tx, message, effects)
            elif isinstance(message, NestedStackJob):
                await self._children.start(tx, message, effects)
            elif isinstance(message, CancelNested):
                await self._children.cancel(tx, message, effects)
            await self.settle(tx, effects)
            ids = await effects.commit(tx)
        await self._outbox.publish(ids, effects.messages)

    async def expire_overdue(self, *, now: float) -> int:
        """Fail (and roll back, where enabled) operations past their timeout_mins."""
        effects = Effects()
        async with self._store.transaction() as tx:
            overdue = await tx.overdue_stacks(now)
            for stack in overdue:
                assert stack.current_traversal is not None
                names = await tx.in_progress_names(stack.stack_id)
                reason = (
                    f"Stack {stack.action.value} timed out; still in progress: {', '.join(names) or 'none'}"
                )
                cancel_children(await tx.resources(stack.stack_id), effects)
                await tx.disown_jobs(stack.stack_id, stack.current_traversal, "Resource timed out")
                await self._fail_stack(tx, stack, stack.current_traversal, reason, effects)
            ids = await effects.commit(tx)
        await self._outbox.publish(ids, effects.messages)
        return len(overdue)

    # -- checks ---------------------------------------------------------------

    async def _check(self, tx: Tx, msg: CheckResource, fx: Effects, resolved: Resolved) -> None:
        stack = await tx.stack(StackId(msg.stack_id))
        traversal = TraversalId(msg.traversal_id)
        if stack is None or stack.current_traversal != traversal:
            log.debug("check_superseded", node=msg.node)
            return
        node = Node(msg.node)
        state = await tx.node(traversal, node)
        if state is None or state.done:
            return
        row = await tx.resource(msg.resource_id)
        if row is None:  # already cleaned up by an earlier traversal
            await self._node_done(tx, stack, traversal, node, fx)
            return
        if _moved_by_its_job(row, traversal, node):
            return
        if row.current_job is not None and not is_nested(row.type) and not preempted(stack, row):
            # An older traversal's job is still running on this row: wait for its outcome.
            # (A nested job is not waited for: the new job preempts the child's operation;
            # nor is a deployment waiting for its server's signal, by a delete or rollback.)
            # The stack is read again after the row: had a newer update committed (and its
            # check registered on this row) since the stack was first read, this older
            # check must not take the row's one waiting slot from it.
            fresh = await tx.stack(stack.stack_id)
            if fresh is None or fresh.current_traversal != traversal:
                log.debug("check_superseded", node=msg.node)
                return
            if not await tx.update_resource(row, waiting_traversal=traversal, waiting_node=node):
                raise ConflictError(f"resource {row.resource_id} changed while checking")
            log.info("check_waits_for_running_job", resource=row.name, job_id=row.current_job)
            return
        if stack.action in STACK_ACTIONS:
            await self._check_action(tx, stack, traversal, node, row, fx)
        elif is_forward(node):
            await self._check_forward(tx, stack, traversal, node, row, fx, resolved)
        else:
            await self._check_cleanup(tx, stack, traversal, node, row, fx)

    async def _check_forward(
        self,
        tx: Tx,
        stack: StackRow,
        traversal: TraversalId,
        node: Node,
        row: ResourceRow,
        fx: Effects,
        resolved: Resolved,
    ) -> None:
        assert stack.current_template_id is not None
        definition = await self._definitions.get(tx, stack, stack.current_template_id)
        goal = definition.resources[row.name]
        nested = is_nested(goal.type)
        cls = self._types.get(goal.type)
        needed = await tx.current_resources(stack.stack_id, goal.requires)
        data = {n: reference_data(r, self._types) for n, r in needed.items() if n in goal.references}
        requires = frozenset(r.resource_id for r in needed.values())
        try:
            properties, metadata = await resolved.goal_values(
                self._templates, definition, row.name, data, stack.current_template_id
            )
        except ResolutionError as exc:
            await self._fail(
                tx, stack, traversal, row, Action.UPDATE if row.exists else Action.CREATE, str(exc), fx
            )
            return
        if nested:
            record = await tx.template(stack.current_template_id)
            assert record is not None
            facade = facade_of(metadata, goal.deletion_policy.value, goal.update_policy)
            properties = with_digest(properties, goal_digest(record.environment, record.files, facade))
        decision = decide_forward(
            row,
            type_name=goal.type,
            schema=cls.properties if cls is not None else None,
            properties=properties,
            external_id=goal.external_id,
            nested=nested,
            replaced_on_update=cls is not None and cls.replaced_on_update,
            goal_template_id=stack.current_template_id,
        )
        log.debug("check", resource=row.name, decision=decision.kind.value, why=decision.why or None)
        gates = (tx, stack, traversal, node, row, goal, decision.kind, definition.environment, fx)
        if not await self.gates.before_forward(*gates):
            return  # paused at a hook, or observing first: what opens the gate checks again
        restricted = restricted_action(decision.kind, definition.environment.restricted_actions_for(row.name))
        if restricted is not None:
            # Heat: the resource keeps its state; its event and the stack say why.
            log.info("action_restricted", resource=row.name, action=restricted)
            fx.event(
                stack.stack_id,
                row.name,
                row.physical_id,
                row.type,
                "UPDATE",
                "FAILED",
                restricted_reason(restricted),
            )
            await self._fail_stack(tx, stack, traversal, restricted_failure(row.name, restricted), fx)
            return
        adopt = {
            "template_id": stack.current_template_id,
            "deletion_policy": goal.deletion_policy.value,
            "metadata": metadata,  # stored with the row's other changes, never on its own
        }
        if decision.kind is Forward.NOTHING:
            await self._update(tx, row, requires=requires, **adopt)
            await self._node_done(tx, stack, traversal, node, fx)
        elif decision.kind is Forward.ADOPT:
            external = not row.exists  # an external_id; else adopt_stack_data set the physical id
            physical_id = goal.external_id if external else row.physical_id
            refusal = (
                await take_over(
                    tx,
                    stack,
                    row,
                    physical_id,
                    external=external,
                    max_depth=self._limits.max_nested_depth,
                    quotas=self._quotas,
                )
                if nested
                else None
            )
            if refusal is not None:
                await self._fail(tx, stack, traversal, row, Action.ADOPT, refusal, fx)
                return
            await self._update(
                tx,
                row,
                physical_id=physical_id,
                action=Action.ADOPT,
                status=Status.COMPLETE,
                status_reason="",
                properties=properties,
                requires=requires,
                external=external,
                **adopt,
            )
            fx.event(stack.stack_id, row.name, physical_id, goal.type, "ADOPT", "COMPLETE", "adopted")
            await self._node_done(tx, stack, traversal, node, fx)
        elif decision.kind is Forward.REPLACE:
            await self._replace(
                tx, stack, traversal, node, row, goal.type, properties, requires, adopt, fx, why=decision.why
            )
        else:
            action = JobAction.CREATE if decision.kind is Forward.CREATE else JobAction.UPDATE
            # The template is adopted when the action succeeds (see _result), not now.
            await self._issue(
                tx,
                stack,
                traversal,
                node,
                row,
                action,
                properties,
                requires,
                fx,
                type=goal.type,
                deletion_policy=adopt["deletion_policy"],
                metadata=metadata,
            )

    async def _check_action(
        self, tx: Tx, stack: StackRow, traversal: TraversalId, node: Node, row: ResourceRow, fx: Effects
    ) -> None:
        """A node of a check, suspend or resume: run that action on the resource as it is."""
        if not row.exists:
            if stack.action is Action.CHECK:  # a failed check does not stop its dependents' checks
                reason = failure_reason(Action.CHECK, "the resource does not exist")
                await self._update(tx, row, **missing_marks(reason), traversal_id=traversal)
                fx.event(stack.stack_id, row.name, None, row.type, "CHECK", "FAILED", reason)
            await self._node_done(tx, stack, traversal, node, fx)
            return
        action = JobAction(stack.action.value.lower())
        if action is JobAction.SNAPSHOT and not takes_snapshots(self._types.get(row.type)):
            await self._node_done(tx, stack, traversal, node, fx)  # its document entry is the snapshot
            return
        properties = row.properties or {}
        changes = {"job_template_id": row.template_id}
        await self._issue(tx, stack, traversal, node, row, action, properties, row.requires, fx, **changes)

    async def _replace(
        self,
        tx: Tx,
        stack: StackRow,
        traversal: TraversalId,
        node: Node,
        row: ResourceRow,
        type_name: str,
        properties: Mapping[str, Any],
        requires: frozenset[ResourceId],
        adopt: Mapping[str, Any],
        fx: Effects,
        *,
        why: str,
    ) -> None:
        """Create a new row first; the old one is deleted by its cleanup node later."""
        assert stack.current_template_id is not None
        (new_id,) = await tx.insert_resources(
            stack.stack_id,
            [(row.name, type_name, stack.current_template_id, adopt["deletion_policy"])],
            replaces=row.resource_id,
        )
        await self._update(tx, row, replaced_by=new_id)
        fx.event(
            stack.stack_id,
            row.name,
            row.physical_id,
            row.type,
            "UPDATE",
            "IN_PROGRESS",
            f"Replacing: {why}" if why else "Replacing",
        )
        replacement = await tx.resource(new_id)
        assert replacement is not None
        metadata = adopt["metadata"] if "metadata" in adopt else await tx.resource_metadata(row.resource_id)
        await self._issue(
            tx,
            stack,
            traversal,
            node,
            replacement,
            JobAction.CREATE,
            properties,
            requires,
            fx,
            metadata=metadata,
        )

    async def _check_cleanup(
        self, tx: Tx, stack: StackRow, traversal: TraversalId, node: Node, row: ResourceRow, fx: Effects
    ) -> None:
        decision = decide_cleanup(row, current_template_id=stack.current_template_id)
        log.debug("cleanup", resource=row.name, resource_id=row.resource_id, decision=decision.value)
        if not await self.gates.before_cleanup(tx, stack, traversal, node, row, decision, fx):
            return  # paused at a pre-delete hook until it is cleared
        if decision is Cleanup.KEEP:
            await self._node_done(tx, stack, traversal, node, fx)
        elif decision is Cleanup.LET_GO:
            released = is_nested(row.type) and await release(tx, stack, row)
            await self._delete(tx, row)
            what = "its nested stack is a top-level stack again" if released else "it is left as it is"
            reason = f"Let go (adopted through external_id, not managed by this stack): {what}"
            fx.event(stack.stack_id, row.name, row.physical_id, row.type, "DELETE", "COMPLETE", reason)
            await self._node_done(tx, stack, traversal, node, fx)
        elif decision is Cleanup.FORGET:
            await self._delete(tx, row)
            if row.exists:
                fx.event(
                    stack.stack_id,
                    row.name,
                    row.physical_id,
                    row.type,
                    "DELETE",
                    "COMPLETE",
                    "Retained (deletion_policy: Retain)",
                )
            await self._node_done(tx, stack, traversal, node, fx)
        else:
            await self._issue(
                tx, stack, traversal, node, row, JobAction.DELETE, row.properties or {}, row.requires, fx
            )

    async def _issue(
        self,
        tx: Tx,
        stack: StackRow,
        traversal: TraversalId,
        node: Node,
        row: ResourceRow,
        action: JobAction,
        properties: Mapping[str, Any],
        requires: frozenset[ResourceId],
        fx: Effects,
        **row_changes: Any,
    ) -> None:
        """Record the job on the row (compare-and-swap, with any `row_changes`) and queue
        it, in one transaction."""
        job_id = uuid.uuid4().hex
        type_name = row_changes.get("type", row.type)
        job = job_for(
            stack,
            row,
            job_id=job_id,
            traversal=traversal,
            action=action,
            type_name=type_name,
            physical_id=row.physical_id,
            properties=properties,
            previous=row.properties,
        )
        heat_action = Action(action.value.upper())
        await self._update(
            tx,
            row,
            **{
                "action": heat_action,
                "status": Status.IN_PROGRESS,
                "status_reason": "",
                "current_job": job_id,
                "job_node": node,
                "job_properties": dict(properties),
                "job_requires": requires,
                "job_template_id": stack.current_template_id,
                "traversal_id": traversal,
                **row_changes,
            },
        )
        fx.event(
            stack.stack_id, row.name, row.physical_id, type_name, heat_action, "IN_PROGRESS", "state changed"
        )
        if is_nested(type_name):  # run by an engine, as an operation of the child stack
            nested = NestedStackJob(
                job_id=job_id, stack_id=stack.stack_id, resource_id=row.resource_id, action=action
            )
            fx.emit(ENGINE_QUEUE, nested)
        elif is_config_type(type_name):  # the engine stores the config, in this transaction
            result = await run_config_job(tx, job, self._types, max_bytes=self._config_bytes)
            if result is not None:  # None: a deployment waits for its server's signal
                fx.emit(ENGINE_QUEUE, result)
        else:
            fx.emit(JOBS_QUEUE, job)

    def _job(
        self, stack: StackRow | None, row: ResourceRow, action: JobAction, physical_id: str | None
    ) -> ResourceJob:
        """The job in flight on `row`, as an observer needs it."""
        assert row.current_job is not None
        assert row.traversal_id is not None
        return job_for(
            stack,
            row,
            job_id=row.current_job,
            traversal=row.traversal_id,
            action=action,
            type_name=row.type,
            physical_id=physical_id,
            properties=row.job_properties or {},
        )

    # -- results --------------------------------------------------------------

    async def _result(self, tx: Tx, res: JobResult, fx: Effects) -> None:
        row = await tx.resource(res.resource_id)
        if row is None or row.current_job != res.job_id:
            log.info("stale_result", outcome=res.outcome.value)
            await self._reap_orphan(tx, res, fx)
            return
        stack = await tx.stack(row.stack_id)
        assert row.job_node is not None
        assert row.traversal_id is not None
        node, traversal = Node(row.job_node), row.traversal_id
        await job_ended(tx, row, res, fx)  # what a resource's own snapshot kept
        current = stack is not None and stack.current_traversal == traversal
        heat_action = Action(res.action.value.upper())
        done_job: dict[str, Any] = {
            "current_job": None,
            "job_node": None,
            "job_properties": None,
            "job_requires": None,
            "job_template_id": None,
            "waiting_traversal": None,
            "waiting_node": None,
            "observing_job": None,
        }
        if res.outcome is JobOutcome.IN_PROGRESS:
            # Asynchronous action: record what is known; an observer reports the end.
            physical_id = res.physical_id or row.physical_id
            # Recorded so that recovery asks an observer again rather than the worker
            # (services/engine/recovery.py).
            await self._update(tx, row, physical_id=physical_id, observing_job=row.current_job)
            fx.emit(OBSERVE_QUEUE, ObserveRequest(job=self._job(stack, row, res.action, physical_id)))
            if row.type == CONDITION:
                await self._settle_condition(tx, row, fx)
            return
        if res.outcome is JobOutcome.REPLACE and stack is not None and current:
            await self._update(tx, row, action=Action.UPDATE, status=Status.COMPLETE, **done_job)
            fresh = await tx.resource(row.resource_id)
            assert fresh is not None
            assert stack.current_template_id is not None
            await self._replace(
                tx,
                stack,
                traversal,
                node,
                fresh,
                row.type,
                row.job_properties or {},
                row.job_requires or frozenset(),
                {"deletion_policy": row.deletion_policy},
                fx,
                why=res.reason,
            )
            return
        if res.outcome in (JobOutcome.FAILED, JobOutcome.REPLACE, JobOutcome.GONE):
            gone = res.outcome is JobOutcome.GONE
            reason = failure_reason(
                heat_action, res.reason or ("the resource no longer exists" if gone else "replacement needed")
            )
            # A check that finds the resource gone records it missing, so the next update
            # (or heal) creates it again. Whatever failed, the row keeps the properties
            # needed to delete what the action made.
            outcome = missing_marks(reason) if gone else {"status": Status.FAILED, "status_reason": reason}
            physical_id = None if gone else res.physical_id or row.physical_id
            properties = properties_after_failure(heat_action, row.properties, row.job_properties)
            await self._update(
                tx, row, **{"physical_id": physical_id, "properties": properties, **outcome, **done_job}
            )
            fx.event(
                row.stack_id,
                row.name,
                res.physical_id or row.physical_id,
                row.type,
                heat_action,
                "FAILED",
                reason,
            )
            if stack is not None and current and stack.action is Action.CHECK:
                await self._node_done(tx, stack, traversal, node, fx)  # dependents are checked too
            elif stack is not None and current:
                await self._fail_stack(tx, stack, traversal, reason, fx)
            else:
                await self._wake_waiting(row, fx)
            return
        if res.action is JobAction.DELETE and await self._still_wanted(tx, stack, row):
            # A newer traversal wants this resource (e.g. a rollback): keep the row,
            # empty, so its waiting check creates the resource again.
            await self._update(
                tx,
                row,
                physical_id=None,
                action=Action.DELETE,
                status=Status.COMPLETE,
                status_reason="",
                properties=None,
                attributes={},
                current_job=None,
                job_node=None,
                job_properties=None,
                job_requires=None,
                job_template_id=None,
                waiting_traversal=None,
                waiting_node=None,
                observing_job=None,
            )
        elif res.action is JobAction.DELETE:
            await self._delete(tx, row)
        else:
            await self._update(
                tx,
                row,
                status=Status.COMPLETE,
                status_reason="state changed",
                physical_id=res.physical_id,
                # a check refreshes attributes; suspend and resume may report none
                attributes=res.attributes if res.action in CHANGES else {**row.attributes, **res.attributes},
                properties=row.job_properties,
                requires=row.job_requires or frozenset(),
                template_id=row.job_template_id or row.template_id,
                **done_job,
            )
        fx.event(row.stack_id, row.name, res.physical_id, row.type, heat_action, "COMPLETE", "state changed")
        if stack is not None and current:
            await self._node_done(tx, stack, traversal, node, fx)
        else:
            await self._wake_waiting(row, fx)

    async def _reap_orphan(self, tx: Tx, res: JobResult, fx: Effects) -> None:
        """A job nobody waits for any more created a real resource (a late redelivery):
        unless a row owns that resource, delete it, so nothing leaks."""
        created = res.action is JobAction.CREATE and res.outcome in (
            JobOutcome.COMPLETE,
            JobOutcome.IN_PROGRESS,
        )
        if not created or res.physical_id is None or not res.resource_type or is_nested(res.resource_type):
            return  # (a child stack always belongs to a row: it is made with the row's physical id)
        if await tx.resource_by_physical_id(StackId(uuid.UUID(res.stack_id)), res.physical_id) is not None:
            return  # an idempotent replay of a resource a row owns
        log.warning("orphan_reaped", physical_id=res.physical_id, resource=res.resource_name)
        if is_config_type(res.resource_type):
            await reap_config(tx, res)
            return
        fx.emit(JOBS_QUEUE, res.undo(job_id=uuid.uuid4().hex, deadline=deadline_for(None)))

    async def _settle_condition(self, tx: Tx, row: ResourceRow, fx: Effects) -> None:
        """A wait condition that starts waiting may already have all its signals."""
        waiting = await tx.resource(row.resource_id)
        handle_ref = (row.job_properties or {}).get("handle")
        if waiting is None or not isinstance(handle_ref, str):
            return
        # Locking the handle orders this with a signal being stored right now:
        # whichever commits second sees the other's write.
        handle = await tx.resource_by_physical_id(row.stack_id, handle_ref, lock=True)
        if handle is not None:
            result = condition_result(waiting, handle, now=time.time())
            if result is not None:
                fx.emit(ENGINE_QUEUE, result)

    async def _still_wanted(self, tx: Tx, stack: StackRow | None, row: ResourceRow) -> bool:
        """Whether the current traversal has a forward node still to do on `row`."""
        if stack is None or stack.current_traversal is None:
            return False
        state = await tx.node(stack.current_traversal, forward(row.resource_id))
        return state is not None and not state.done

    async def _wake_waiting(self, row: ResourceRow, fx: Effects) -> None:
        if row.waiting_traversal is not None and row.waiting_node is not None:
            fx.check(row.stack_id, row.waiting_traversal, row.waiting_node, row.resource_id)

    # -- propagation and stack outcome ----------------------------------------

    async def _node_done(
        self, tx: Tx, stack: StackRow, traversal: TraversalId, node: Node, fx: Effects
    ) -> None:
        """Mark `node` done and trigger the dependents that needed only it; its sync
        points and its traversal's end wait for `settle`, at the transaction's end."""
        finished = await tx.finish_node(traversal, node)
        if finished is None:
            return
        for dependent in finished.direct:
            fx.check(stack.stack_id, traversal, dependent, resource_of(dependent))
        done = fx.finished
        done.stacks[traversal] = stack
        done.syncs.extend((traversal, dependent, node) for dependent in finished.synced)
        if not finished.direct and not finished.synced:
            done.sinks[traversal] += 1

    async def settle(self, tx: Tx, fx: Effects) -> None:
        """Settle the nodes finished in this transaction (`Effects.finished`): trigger
        the sync points they made ready, then end each traversal whose last sinks
        they were. Called last before the commit: the traversal's row is locked
        only from here to the commit, and only by transactions that finished a sink."""
        done = fx.finished
        if not done:
            return
        for traversal, node in await tx.satisfy(done.syncs):
            fx.check(done.stacks[traversal].stack_id, traversal, node, resource_of(node))
        for traversal in sorted(done.sinks):
            if await tx.count_down(traversal, done.sinks[traversal]) == 0:
                await self._traversal_done(tx, done.stacks[traversal], traversal, fx)
        fx.finished = Finished()

    async def _traversal_done(self, tx: Tx, stack: StackRow, traversal: TraversalId, fx: Effects) -> None:
        action = stack.action
        failed = await tx.failed_checks(stack.stack_id, traversal) if action is Action.CHECK else []
        if failed:
            await self._fail_stack(tx, stack, traversal, check_failure_reason(failed), fx)
            return
        deleted = action is Action.DELETE
        reason = f"Stack {action.value} completed successfully"
        if await tx.set_stack_status(stack.stack_id, traversal, Status.COMPLETE, reason, deleted=deleted):
            fx.stack_event(stack, action.value, "COMPLETE", reason)
            log.info("stack_complete", stack=stack.name, action=action.value)
            await self._answers.stack_ended(tx, stack, Status.COMPLETE, reason, fx)

    async def _fail(
        self,
        tx: Tx,
        stack: StackRow,
        traversal: TraversalId,
        row: ResourceRow,
        action: Action,
        detail: str,
        fx: Effects,
    ) -> None:
        reason = failure_reason(action, detail)
        await self._update(tx, row, action=action, status=Status.FAILED, status_reason=reason)
        fx.event(stack.stack_id, row.name, row.physical_id, row.type, action.value, "FAILED", reason)
        await self._fail_stack(tx, stack, traversal, reason, fx)

    async def _fail_stack(
        self, tx: Tx, stack: StackRow, traversal: TraversalId, reason: str, fx: Effects
    ) -> None:
        await fail_or_roll_back(
            tx, stack, traversal, reason, fx, definitions=self._definitions, answers=self._answers
        )

    async def _delete(self, tx: Tx, row: ResourceRow) -> None:
        if not await tx.delete_resource(row):
            raise ConflictError(f"resource {row.resource_id} changed concurrently; will retry")

    async def _update(self, tx: Tx, row: ResourceRow, **changes: Any) -> None:
        if not await tx.update_resource(row, **changes):
            raise ConflictError(f"resource {row.resource_id} changed concurrently; will retry")


def _context(message: Message) -> dict[str, str]:
    """What the log lines of handling `message` name."""
    if isinstance(message, CheckResource):
        return {"stack_id": str(message.stack_id), "traversal_id": str(message.traversal_id)}
    if isinstance(message, JobResult):
        return {"stack_id": message.stack_id, "resource": message.resource_name, "job_id": message.job_id}
    if isinstance(message, NestedStackJob | CancelNested):
        return {"stack_id": str(message.stack_id), "job_id": message.job_id}
    return {}


def _moved_by_its_job(row: ResourceRow, traversal: TraversalId, node: Node) -> bool:
    """Whether a check of `node` is a duplicate (a redelivery under another message id,
    or one sent again by recovery) that must do nothing: the node's own job is in
    flight on the row, or the node replaced the row already (only a forward node can,
    within its traversal) and the replacement's job finishes it. Checking again would
    send a second job, or make a second replacement."""
    if row.current_job is not None and row.traversal_id == traversal and row.job_node == node:
        log.debug("check_duplicate", node=node, job_id=row.current_job)
        return True
    if is_forward(node) and row.replaced_by is not None:
        log.debug("check_duplicate", node=node, replaced_by=row.replaced_by)
        return True
    return False
