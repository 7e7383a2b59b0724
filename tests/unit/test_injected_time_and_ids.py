"""A node's gates decide by the engine's injected clock and name their looks by its injected ids.

What is real: `Gates`, the gate decisions of `core.gates`, the row change it
writes and the look it queues. What is faked: the transaction, by a record of
the two statements a gate uses (their SQL runs against PostgreSQL in the
integration tests); the store and outbox of the `EngineDeps` are not reached
by a node's gates and are left out (None)."""

from __future__ import annotations

import itertools
import json
import uuid
from typing import Any, cast

from services.engine.core.decide import Forward
from services.engine.core.gates import OBSERVE, PAUSE, GateState
from services.engine.core.model import (
    Action,
    Node,
    ResourceId,
    ResourceRow,
    StackId,
    StackRow,
    Status,
    TemplateId,
    TraversalId,
)
from services.engine.core.row_change import ResourceChange
from services.engine.core.sources import Ids
from services.engine.deps import EngineDeps
from services.engine.effects import Effects
from services.engine.gates import LOOK_SECONDS, Gates
from services.engine.store.tx import Tx
from services.engine.template import Environment
from services.engine.template.definition import ResourceDefinition
from shared.plugins.builtin.testresource import TestResource
from shared.protocol import OBSERVE_QUEUE

NOW = 1_000_000.0  # the fake clock's instant: far from the wall clock's
TRAVERSAL = TraversalId(uuid.UUID(int=1))
NODE = Node(3)


class GateStatements:
    """The statements of a gate, in memory: the row's gate state and the changes written."""

    def __init__(self, *, converges: bool = False) -> None:
        self.written: list[ResourceChange] = []
        self._converges = converges

    async def gate_state(self, resource_id: int) -> GateState:
        return GateState()

    async def converges(self, traversal: TraversalId) -> bool:
        return self._converges

    async def update_resource(self, row: ResourceRow, change: ResourceChange) -> bool:
        self.written.append(change)
        return True


def counted_ids() -> Ids:
    counter = itertools.count(100)
    return Ids(new=lambda: uuid.UUID(int=next(counter)))


def gates(ids: Ids | None = None) -> Gates:
    nothing = cast(Any, None)
    deps = EngineDeps.build(
        store=nothing,
        outbox=nothing,
        types={TestResource.type_name: TestResource},
        clock=lambda: NOW,
        ids=ids or counted_ids(),
    )
    return Gates(deps)


def stack(action: Action) -> StackRow:
    return StackRow(
        stack_id=StackId(uuid.UUID(int=9)),
        project_id="p",
        name="s",
        action=action,
        status=Status.IN_PROGRESS,
        status_reason="",
        current_traversal=TRAVERSAL,
        current_template_id=TemplateId(uuid.UUID(int=8)),
        previous_template_id=None,
    )


def member(physical_id: str | None) -> ResourceRow:
    return ResourceRow(
        resource_id=ResourceId(1),
        stack_id=StackId(uuid.UUID(int=9)),
        name="m1",
        type=TestResource.type_name,
        physical_id=physical_id,
        action=Action.CREATE,
        status=Status.COMPLETE,
        properties={"value": "a"},
    )


GOAL = ResourceDefinition(
    name="m1",
    type=TestResource.type_name,
    template_type=TestResource.type_name,
    properties={},
    metadata={},
    requires=frozenset(),
)


async def test_a_batch_pause_ends_at_the_injected_clocks_now_plus_the_pause() -> None:
    tx = GateStatements()
    environment = Environment(batch_pause=(30.0, frozenset({"m1"})))

    passed = await gates().before_forward(
        cast(Tx, tx),
        stack(Action.CREATE),
        TRAVERSAL,
        NODE,
        member(None),
        GOAL,
        Forward.CREATE,
        environment,
        Effects(),
    )

    assert not passed, "the member waits for its batch's pause"
    (change,) = tx.written
    assert change.gate_waiting == PAUSE
    assert change.gate_until == NOW + 30.0


async def test_a_look_before_an_update_is_named_by_the_injected_ids_and_due_by_the_injected_clock() -> None:
    tx, fx = GateStatements(converges=True), Effects()

    passed = await gates().before_forward(
        cast(Tx, tx),
        stack(Action.UPDATE),
        TRAVERSAL,
        NODE,
        member("p1"),
        GOAL,
        Forward.UPDATE,
        Environment(),
        fx,
    )

    assert not passed, "the update waits for its look"
    assert tx.written[0].gate_waiting == OBSERVE
    ((queue, text),) = fx.messages
    assert queue == OBSERVE_QUEUE
    look = json.loads(text)
    assert look["job"]["job_id"] == f"look-{uuid.UUID(int=100).hex}"
    assert look["job"]["deadline"] == NOW + LOOK_SECONDS
