"""Which gates a node's check waits at (hooks, converge's observation), and whether a node
has passed them, as Heat's breakpoints behave. Pure."""

from __future__ import annotations

import uuid

from services.engine.core.decide import Cleanup, Forward
from services.engine.core.gates import (
    OBSERVE,
    GateState,
    Step,
    cleanup_gates,
    forward_gates,
    next_gate,
    paused_reason,
)
from services.engine.core.model import Action, Node, TraversalId

T1, T2 = TraversalId(uuid.uuid4()), TraversalId(uuid.uuid4())
NODE = Node(7)


def gates(
    action: Action, decision: Forward, *, exists: bool = True, hooks: tuple[str, ...] = (), **kw: bool
) -> tuple[str, ...]:
    return forward_gates(
        stack_action=action,
        decision=decision,
        exists=exists,
        external=kw.get("external", False),
        hooks=hooks,
        converge=kw.get("converge", False),
        observable=kw.get("observable", True),
    )


def test_pre_create_holds_creates_of_a_stack_create_only_as_heat_does() -> None:
    assert gates(Action.CREATE, Forward.CREATE, exists=False, hooks=("pre-create",)) == ("pre-create",)
    # Heat: a resource an update adds, or a replacement, is created without the hook.
    assert gates(Action.UPDATE, Forward.CREATE, exists=False, hooks=("pre-create",)) == ()
    assert gates(Action.CREATE, Forward.ADOPT, exists=False, hooks=("pre-create",)) == ()


def test_pre_update_holds_every_existing_resource_an_update_rollback_or_restore_reaches() -> None:
    for action in (Action.UPDATE, Action.ROLLBACK, Action.RESTORE):
        for decision in (Forward.UPDATE, Forward.NOTHING, Forward.REPLACE):
            assert gates(action, decision, hooks=("pre-update",)) == ("pre-update",), (action, decision)
    assert gates(Action.UPDATE, Forward.UPDATE, hooks=("pre-update",), external=True) == ()
    assert gates(Action.UPDATE, Forward.CREATE, exists=False, hooks=("pre-update",)) == ()
    assert gates(Action.CREATE, Forward.NOTHING, hooks=("pre-update",)) == ()


def test_converge_observes_existing_observable_resources_after_their_hook() -> None:
    assert gates(Action.UPDATE, Forward.NOTHING, hooks=("pre-update",), converge=True) == (
        "pre-update",
        OBSERVE,
    )
    assert gates(Action.UPDATE, Forward.NOTHING, converge=True, observable=False) == ()
    assert gates(Action.UPDATE, Forward.CREATE, exists=False, converge=True) == ()


def test_pre_delete_holds_a_stack_delete_of_an_existing_resource() -> None:
    assert cleanup_gates(
        stack_action=Action.DELETE, decision=Cleanup.DELETE, exists=True, hooks=("pre-delete",)
    ) == ("pre-delete",)
    assert cleanup_gates(
        stack_action=Action.DELETE, decision=Cleanup.FORGET, exists=True, hooks=("pre-delete",)
    ) == ("pre-delete",), (
        "a retained resource pauses too, as in Heat (the hook comes before the deletion policy)"
    )
    assert (
        cleanup_gates(stack_action=Action.UPDATE, decision=Cleanup.DELETE, exists=True, hooks=("pre-delete",))
        == ()
    )
    assert (
        cleanup_gates(
            stack_action=Action.DELETE, decision=Cleanup.DELETE, exists=False, hooks=("pre-delete",)
        )
        == ()
    )


def test_a_node_waits_once_per_gate_and_a_check_sent_again_changes_nothing() -> None:
    fresh = GateState().of(T1, NODE)
    assert next_gate(("pre-update", OBSERVE), fresh).step is Step.WAIT
    waiting = GateState(T1, NODE, "pre-update")
    assert next_gate(("pre-update", OBSERVE), waiting.of(T1, NODE)).step is Step.STILL_WAITING
    cleared = GateState(T1, NODE, None, frozenset({"pre-update"}))
    decided = next_gate(("pre-update", OBSERVE), cleared.of(T1, NODE))
    assert (decided.step, decided.gate) == (Step.WAIT, OBSERVE)
    done = GateState(T1, NODE, None, frozenset({"pre-update", OBSERVE}))
    assert next_gate(("pre-update", OBSERVE), done.of(T1, NODE)).step is Step.PROCEED
    # Another traversal starts afresh: an update after a cleared hook pauses again.
    assert next_gate(("pre-update",), done.of(T2, NODE)).step is Step.WAIT


def test_the_pause_event_says_what_heatclient_polls_for() -> None:
    assert paused_reason("pre-create") == "CREATE paused until Hook pre-create is cleared"
    assert paused_reason("pre-update") == "UPDATE paused until Hook pre-update is cleared"
    assert paused_reason("pre-delete") == "DELETE paused until Hook pre-delete is cleared"
