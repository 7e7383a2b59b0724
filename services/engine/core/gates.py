"""Gates: what a node's check waits at before it acts. Pure.

Where it sits: the check of a node (`services.engine.convergence.checks`) has decided
what to do with its resource; before it acts, `services.engine.gates` asks
which gates apply (`forward_gates`, `cleanup_gates`) and whether the node has
passed them (`next_gate`, from the `GateState` stored on the row). Two kinds:

- hooks (Heat's breakpoints, set in the environment's `resource_registry`):
  `pre-create` before a resource is created by a stack create, `pre-update`
  before each existing resource is updated (or found unchanged) by an update,
  rollback or restore, `pre-delete` before a resource is deleted by a stack
  delete; as in Heat, no hook for creates and deletes an update makes. The
  node waits until the hook is cleared (a signal with `unset_hook`). Only that
  resource and what depends on it wait: the rest of the graph goes on.
- `observe`: in an update with `converge: true`, each existing resource is
  looked at by an observer before its decision, so what changed out of band
  is what the decision compares with the goal.
- `pause`: a member of a ResourceGroup's batch after the first (its
  `update_policy`'s `pause_time`, see `core.groups.batches`) waits that long
  once the batch before it is done, before it is created or updated; the
  engine's timer passes the gate when the time is up.

A gate is passed once per node of a traversal. A check sent again (recovery,
a duplicate) finds the same gate waiting and does nothing (`STILL_WAITING`),
so a paused node stays paused whatever resends its check.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from enum import StrEnum

from services.engine.core.decide import Cleanup, Forward
from services.engine.core.model import Action, Node, TraversalId

OBSERVE = "observe"
PAUSE = "pause"
PRE_CREATE, PRE_UPDATE, PRE_DELETE = "pre-create", "pre-update", "pre-delete"
#: What a hook holds back, as its events name it ("CREATE paused until Hook pre-create is cleared").
HOOK_ACTIONS = {PRE_CREATE: Action.CREATE, PRE_UPDATE: Action.UPDATE, PRE_DELETE: Action.DELETE}
#: Stack operations during which pre-update applies (each converges existing resources).
UPDATING = frozenset({Action.UPDATE, Action.ROLLBACK, Action.RESTORE})


@dataclass(frozen=True)
class GateState:
    """What a row records of its gates: the node they belong to, the gate it waits at
    (None: none), and the gates it has passed."""

    traversal: TraversalId | None = None
    node: Node | None = None
    waiting: str | None = None
    passed: frozenset[str] = frozenset()

    def of(self, traversal: TraversalId, node: Node) -> GateState:
        """This state if it is `node`'s of `traversal`, else a fresh one."""
        if self.traversal == traversal and self.node == node:
            return self
        return GateState(traversal, node)


class Step(StrEnum):
    PROCEED = "proceed"  # every gate passed: act
    WAIT = "wait"  # a gate to wait at now (record it; a hook's event, an observation)
    STILL_WAITING = "still_waiting"  # waiting at it already: a check sent again


@dataclass(frozen=True)
class GateDecision:
    step: Step
    gate: str | None = None


def is_hook(gate: str) -> bool:
    return gate in HOOK_ACTIONS


def forward_gates(
    *,
    stack_action: Action,
    decision: Forward,
    exists: bool,
    external: bool,
    hooks: Collection[str],
    converge: bool,
    observable: bool,
    pause: bool = False,
) -> tuple[str, ...]:
    """The gates of a forward node, in order: its batch's pause (`pause`: it waits one,
    when it has something to do), its hook, then its observation."""
    gates: list[str] = []
    if pause and decision is not Forward.NOTHING:
        gates.append(PAUSE)
    if PRE_CREATE in hooks and stack_action is Action.CREATE and decision is Forward.CREATE:
        gates.append(PRE_CREATE)
    settled = exists and not external and decision is not Forward.ADOPT
    if PRE_UPDATE in hooks and stack_action in UPDATING and settled:
        gates.append(PRE_UPDATE)
    if converge and observable and settled:
        gates.append(OBSERVE)
    return tuple(gates)


def cleanup_gates(
    *, stack_action: Action, decision: Cleanup, exists: bool, hooks: Collection[str]
) -> tuple[str, ...]:
    """The gates of a cleanup node: `pre-delete` before a stack delete removes a resource."""
    if PRE_DELETE in hooks and stack_action is Action.DELETE and exists and decision is not Cleanup.KEEP:
        return (PRE_DELETE,)
    return ()


def next_gate(gates: Sequence[str], state: GateState) -> GateDecision:
    """Where a node with `gates` (and its row's `state`, already `of` the node) stands."""
    for gate in gates:
        if gate in state.passed:
            continue
        if state.waiting == gate:
            return GateDecision(Step.STILL_WAITING, gate)
        return GateDecision(Step.WAIT, gate)
    return GateDecision(Step.PROCEED)


def paused_reason(hook: str) -> str:
    """The event of a node reaching `hook` (heatclient's `stack hook poll` looks for it)."""
    return f"{HOOK_ACTIONS[hook].value} paused until Hook {hook} is cleared"


def cleared_reason(hook: str) -> str:
    return f"Hook {hook} is cleared"
