"""Effects a decision produces, collected and committed in one transaction.

Handlers append events and outgoing messages to an `Effects` while they
decide; `commit` writes the events and the outbox rows inside the same
transaction as the state change, and returns what the caller publishes
once the transaction is committed. One `Effects` may gather the decisions
of a whole batch of messages (`services/engine/batching.py`): its events
and outbox rows are then written in one statement each.

Nodes finished in the transaction are gathered too (`finished`): what they
mean for their sync points and their traversal's end is settled once, just
before the commit (`convergence.propagation.settle`), in one statement for all the sync
points and one per traversal whose sinks finished.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from services.engine.core.model import Node, ResourceId, StackId, StackRow, TraversalId
from services.engine.messages import CheckResource
from services.engine.store.events import EventRecord
from services.engine.store.tx import Tx
from shared.messages import Message
from shared.protocol import ENGINE_QUEUE

STACK_TYPE = "OS::Heat::Stack"


@dataclass
class Finished:
    """Nodes finished in one transaction, waiting to be settled before its commit."""

    #: (traversal, sync point, the finished node it waits for)
    syncs: list[tuple[TraversalId, Node, Node]] = field(default_factory=list)
    #: traversal -> how many of its sinks finished
    sinks: Counter[TraversalId] = field(default_factory=Counter)
    #: the stack of each traversal named above
    stacks: dict[TraversalId, StackRow] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.syncs or self.sinks)


@dataclass
class Effects:
    messages: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    events: list[EventRecord] = field(default_factory=list)
    finished: Finished = field(default_factory=Finished)

    def emit(self, queue: str, message: Message) -> None:
        self.messages.append((queue, json.loads(message.encode())))

    def check(self, stack_id: StackId, traversal: TraversalId, node: Node, resource_id: ResourceId) -> None:
        self.emit(
            ENGINE_QUEUE,
            CheckResource(stack_id=stack_id, traversal_id=traversal, node=node, resource_id=resource_id),
        )

    def event(
        self,
        stack_id: StackId,
        name: str,
        physical_id: str | None,
        type_name: str,
        action: str,
        status: str,
        reason: str = "",
    ) -> None:
        self.events.append(EventRecord(stack_id, name, physical_id, type_name, action, status, reason))

    def stack_event(self, stack: StackRow, action: str, status: str, reason: str) -> None:
        self.event(stack.stack_id, stack.name, str(stack.stack_id), STACK_TYPE, action, status, reason)

    async def commit(self, tx: Tx) -> list[int]:
        await tx.add_events(self.events)
        return await tx.add_outbox(self.messages)
