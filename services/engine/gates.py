"""Gates in the check path (async shell): hooks that pause a node, the observation
an update with `converge: true` makes before it decides, and the pause a group member
of a later batch waits (`update_policy`'s `pause_time`).

Where it sits: a node's check (`services.engine.convergence.checks`) has decided what to do
with its resource; before acting it calls `before_forward` (or
`before_cleanup`), which answers whether the node may act now. When it may
not, the gate it waits at is recorded on the row (compare-and-swap, in the
check's transaction) with its event (a hook: "CREATE paused until Hook
pre-create is cleared") or its look (`ObserveResource` to an observer). What
opens the gate sends the node's check again: `clear_hook` (a signal with
`unset_hook`, through `services.engine.signals`) or `observed` (the observer's
answer, from `EngineService`), which first marks on the row what changed out
of band (`core.drift`), so the decision the check makes again compares the
goal with reality, or `end_pauses` (the engine's timer, once a pause's
`gate_until` has come; any engine's, so a pause outlives the engine that
began it). Which gates apply and whether a node has passed them is
decided purely (`core.gates`).

A check that reaches a gate its node already waits at (recovery sending the
checks of ready nodes again, a duplicate) changes nothing: a paused node stays
paused across engine restarts, and a lost look is sent again.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from typing import Any

import structlog

from services.engine.core.decide import Cleanup, Forward
from services.engine.core.drift import find_drift, heal_marks
from services.engine.core.gates import (
    OBSERVE,
    PAUSE,
    GateState,
    Step,
    cleanup_gates,
    cleared_reason,
    forward_gates,
    is_hook,
    next_gate,
    paused_reason,
)
from services.engine.core.model import Action, Node, ResourceRow, StackId, StackRow, Status, TraversalId
from services.engine.core.nesting import is_nested
from services.engine.core.row_change import NO_CHANGE, ResourceChange
from services.engine.deps import EngineDeps
from services.engine.effects import Effects
from services.engine.jobs import job_for
from services.engine.store.tx import Tx
from services.engine.template import Environment, ResourceDefinition
from services.engine.template.environment import HOOKS, UNSUPPORTED_HOOKS
from shared.errors import ConflictError, InvalidInput
from shared.protocol import OBSERVE_QUEUE, JobAction, ObserveResource, ResourceObserved

log = structlog.get_logger(__name__)

#: How long an observer may take to answer a gate's look before it is worth asking again.
LOOK_SECONDS = 60.0
#: Traversals whose converge flag each engine remembers (it never changes).
_REMEMBERED = 10_000


class HookNotSet(InvalidInput):
    """An `unset_hook` signal for a hook the resource is not paused at."""


class Gates:
    def __init__(self, deps: EngineDeps) -> None:
        self._store = deps.store
        self._outbox = deps.outbox
        self._definitions = deps.definitions
        self._types = deps.types
        self._clock = deps.clock  # a pause's end and a look's deadline (seconds since the epoch)
        self._ids = deps.ids
        self._converging: OrderedDict[TraversalId, bool] = OrderedDict()

    # -- in a check -------------------------------------------------------------

    async def before_forward(
        self,
        tx: Tx,
        stack: StackRow,
        traversal: TraversalId,
        node: Node,
        row: ResourceRow,
        goal: ResourceDefinition,
        decision: Forward,
        environment: Environment,
        fx: Effects,
    ) -> bool:
        """Whether the forward node may act on `decision` now (False: it waits at a gate)."""
        converge = row.exists and stack.action is Action.UPDATE and await self._converges(tx, traversal)
        pause = environment.pause_before(row.name)
        gates = forward_gates(
            stack_action=stack.action,
            decision=decision,
            exists=row.exists,
            external=row.external or goal.external_id is not None,
            hooks=environment.hooks_for(row.name),
            converge=converge,
            observable=row.type in self._types and not is_nested(row.type),
            pause=pause > 0,
        )
        return await self._through(tx, stack, traversal, node, row, gates, fx, pause=pause)

    async def before_cleanup(
        self,
        tx: Tx,
        stack: StackRow,
        traversal: TraversalId,
        node: Node,
        row: ResourceRow,
        decision: Cleanup,
        fx: Effects,
    ) -> bool:
        """Whether the cleanup node may act on `decision` now: a stack delete waits at
        the `pre-delete` hooks of the environment the stack had before it."""
        if stack.action is not Action.DELETE or not row.exists or stack.previous_template_id is None:
            return True
        before = await self._definitions.get(tx, stack, stack.previous_template_id)
        hooks = before.environment.hooks_for(row.name)
        gates = cleanup_gates(stack_action=stack.action, decision=decision, exists=row.exists, hooks=hooks)
        return await self._through(tx, stack, traversal, node, row, gates, fx)

    async def _through(
        self,
        tx: Tx,
        stack: StackRow,
        traversal: TraversalId,
        node: Node,
        row: ResourceRow,
        gates: tuple[str, ...],
        fx: Effects,
        *,
        pause: float = 0.0,
    ) -> bool:
        if not gates:
            return True
        state = (await tx.gate_state(row.resource_id)).of(traversal, node)
        decided = next_gate(gates, state)
        gate = decided.gate
        if decided.step is Step.PROCEED or gate is None:
            return True
        if decided.step is Step.STILL_WAITING:
            if gate == OBSERVE:  # its look (or the answer) may have been lost: ask again
                fx.emit(OBSERVE_QUEUE, self._look(stack, row, traversal, node))
            log.debug("gate_still_waiting", resource=row.name, gate=gate)
            return False
        reached = ResourceChange(gate_traversal=traversal, gate_node=node, gate_waiting=gate)
        if gate == PAUSE:
            reached |= ResourceChange(gate_until=self._clock() + pause)
        if not await tx.update_resource(row, ResourceChange(gate_passed=state.passed) | reached):
            raise ConflictError(f"resource {row.resource_id} changed while reaching a gate; will retry")
        if is_hook(gate):
            reason = paused_reason(gate)
            fx.event(stack.stack_id, row.name, row.physical_id, row.type, row.action, row.status, reason)
            log.info("hook_reached", resource=row.name, hook=gate)
        elif gate == PAUSE:
            log.info("batch_pause", resource=row.name, seconds=pause)
        else:
            fx.emit(OBSERVE_QUEUE, self._look(stack, row, traversal, node))
            log.info("observing_before_deciding", resource=row.name)
        return False

    def _look(self, stack: StackRow, row: ResourceRow, traversal: TraversalId, node: Node) -> ObserveResource:
        """The look a node's check waits for: the resource as last applied, to an observer."""
        now = self._clock()
        job = job_for(
            stack,
            row,
            job_id=f"look-{self._ids.job()}",
            traversal=traversal,
            action=JobAction.CHECK,
            type_name=row.type,
            physical_id=row.physical_id,
            properties=row.properties or {},
            now=now,
        )
        job = job.model_copy(update={"deadline": now + LOOK_SECONDS})
        return ObserveResource(job=job, cycle=0, gate_traversal=str(traversal), gate_node=node)

    async def _converges(self, tx: Tx, traversal: TraversalId) -> bool:
        known = self._converging.get(traversal)
        if known is None:
            known = await tx.converges(traversal)
            self._converging[traversal] = known
            if len(self._converging) > _REMEMBERED:
                self._converging.popitem(last=False)
        return known

    # -- what opens a gate --------------------------------------------------------

    async def clear_hook(self, tx: Tx, stack: StackRow, row: ResourceRow, hook: Any, fx: Effects) -> None:
        """`unset_hook`: the node paused at `hook` goes on (its check is sent again).
        Raises `HookNotSet` (400, as Heat) for a hook type that does not exist or that
        the resource is not paused at now."""
        if not isinstance(hook, str) or hook not in (*HOOKS, *UNSUPPORTED_HOOKS):
            raise InvalidInput(
                f'Invalid hook type "{hook}" for resource {row.name} of stack {stack.name}; '
                f"acceptable hook types are: {', '.join(HOOKS)}",
                path="unset_hook",
            )
        state = await tx.gate_state(row.resource_id)
        current = stack.status is Status.IN_PROGRESS and state.traversal == stack.current_traversal
        if state.waiting != hook or not current or state.traversal is None or state.node is None:
            raise HookNotSet(f'The "{hook}" hook is not defined on resource {row.name} of stack {stack.name}')
        passed = state.passed | {hook}
        if not await tx.update_resource(row, ResourceChange(gate_waiting=None, gate_passed=passed)):
            raise ConflictError(f"{row.name} changed while its hook was cleared; retry")
        reason = cleared_reason(hook)
        fx.event(stack.stack_id, row.name, row.physical_id, row.type, row.action, row.status, reason)
        fx.check(stack.stack_id, state.traversal, state.node, row.resource_id)
        log.info("hook_cleared", stack_id=str(stack.stack_id), resource=row.name, hook=hook)

    async def end_pauses(self, *, now: float) -> int:
        """Pass the batch pauses that are due (`now`) and send their nodes' checks again."""
        fx = Effects()
        async with self._store.transaction() as tx:
            due = await tx.end_pauses(now)
            for stack_id, traversal, node, resource_id in due:
                fx.check(stack_id, traversal, node, resource_id)
            ids = await fx.commit(tx)
        await self._outbox.publish(ids, fx.messages)
        return len(due)

    async def observed(self, report: ResourceObserved) -> None:
        """An observer's answer to a gate's look: mark on the row what it found changed
        (as a heal would), pass the gate, and send the node's check again."""
        assert report.gate_traversal is not None
        assert report.gate_node is not None
        traversal, node = TraversalId(uuid.UUID(report.gate_traversal)), Node(report.gate_node)
        fx = Effects()
        async with self._store.transaction() as tx:
            if not await tx.claim_message(report.id):
                return
            await self._observed(tx, report, traversal, node, fx)
            ids = await fx.commit(tx)
        await self._outbox.publish(ids, fx.messages)

    async def _observed(
        self, tx: Tx, report: ResourceObserved, traversal: TraversalId, node: Node, fx: Effects
    ) -> None:
        row = await tx.resource(report.resource_id)
        state = await tx.gate_state(report.resource_id)
        if row is None or state != GateState(traversal, node, OBSERVE, state.passed):
            log.debug("look_outdated", resource_id=report.resource_id)
            return
        changes = NO_CHANGE
        cls = self._types.get(row.type)
        if cls is not None and row.physical_id == report.physical_id:
            applied = row.properties or {}
            drift = find_drift(cls.properties, applied, report.state, report.properties, report.reason)
            if drift is not None:
                changes = heal_marks(drift)
                reason = f"Observed before deciding the update: {drift.reason}"
                fx.event(row.stack_id, row.name, row.physical_id, row.type, "OBSERVE", "DRIFTED", reason)
                log.info("observed_drift", resource=row.name, kind=drift.kind.value)
        passed = state.passed | {OBSERVE}
        if not await tx.update_resource(row, ResourceChange(gate_waiting=None, gate_passed=passed) | changes):
            raise ConflictError(f"resource {row.resource_id} changed while its look was recorded; will retry")
        stack = await tx.stack(StackId(row.stack_id))
        if stack is not None and stack.current_traversal == traversal:
            fx.check(stack.stack_id, traversal, node, row.resource_id)
