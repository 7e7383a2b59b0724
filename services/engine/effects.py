"""Effects a decision produces, collected and committed in one transaction.

Handlers append events and outgoing messages to an `Effects` while they
decide; `commit` writes the events and the outbox rows inside the same
transaction as the state change, and returns what the caller publishes
once the transaction is committed. One `Effects` may gather the decisions
of a whole batch of messages (`services/engine/batching.py`): its events
and outbox rows are then written in one statement each.

Nodes finished in the transaction are gathered too (`finished`): their rows,
and what they mean for their dependents, their sync points and their
traversal's end, are settled once, just before the commit
(`convergence.propagation.settle`), in one statement for all the nodes, one for
all the sync points and one per traversal whose counted nodes finished.

The traversal of each job issued is kept too (`issued`): the commit confirms each
is still its stack's (`Tx.confirm_traversals`), so no job of a traversal an
update has preempted commits after the update did.

The node checks emitted are also kept as messages (`checks`), so that a batch
can take some back and handle them in its own transaction instead of sending
them (`convergence.follow_on`); `mark` and `undo` forget what was gathered
since a point, when the savepoint of such handling is rolled back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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

    #: (traversal, node) -> the stack the traversal is of, in the order they finished
    nodes: dict[tuple[TraversalId, Node], StackRow] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.nodes)


@dataclass(frozen=True)
class Mark:
    """How much an `Effects` had gathered at one point (`Effects.mark`)."""

    messages: int
    events: int
    checks: int
    issued: int


@dataclass
class Effects:
    messages: list[tuple[str, str]] = field(default_factory=list)  # (queue, JSON text)
    events: list[EventRecord] = field(default_factory=list)
    finished: Finished = field(default_factory=Finished)
    #: the node checks emitted and not taken back, each with its entry in `messages`
    checks: list[tuple[CheckResource, str]] = field(default_factory=list)
    #: the traversal each job was issued for, by stack: still each stack's at the commit
    issued: list[tuple[StackId, TraversalId]] = field(default_factory=list)

    def emit(self, queue: str, message: Message) -> None:
        self.messages.append((queue, message.text()))

    def check(self, stack_id: StackId, traversal: TraversalId, node: Node, resource_id: ResourceId) -> None:
        self.send_check(
            CheckResource(stack_id=stack_id, traversal_id=traversal, node=node, resource_id=resource_id)
        )

    def send_check(self, message: CheckResource) -> None:
        body = message.text()
        self.messages.append((ENGINE_QUEUE, body))
        self.checks.append((message, body))

    def take_checks(self, limit: int) -> list[CheckResource]:
        """Take back up to `limit` of the node checks emitted, oldest first: they are
        no longer sent (unless given back with `send_check`)."""
        taken, self.checks = self.checks[:limit], self.checks[limit:]
        if taken:
            bodies = {id(body) for _, body in taken}
            self.messages = [m for m in self.messages if id(m[1]) not in bodies]
        return [message for message, _ in taken]

    def issued_for(self, stack_id: StackId, traversal: TraversalId) -> None:
        """A job of `traversal` was issued: `commit` confirms the stack still runs it."""
        self.issued.append((stack_id, traversal))

    def mark(self) -> Mark:
        return Mark(len(self.messages), len(self.events), len(self.checks), len(self.issued))

    def undo(self, mark: Mark) -> None:
        """Forget what was gathered since `mark` (nothing taken back meanwhile), and
        the finished nodes not yet settled."""
        del self.messages[mark.messages :]
        del self.events[mark.events :]
        del self.checks[mark.checks :]
        del self.issued[mark.issued :]
        self.finished = Finished()

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
        """Write the events and the outbox rows; first raise `ConflictError` if an update
        has preempted a traversal a job was issued for (`Tx.confirm_traversals`), so that
        from the update's commit on none of its preempted traversal's jobs commits."""
        await tx.confirm_traversals(self.issued)
        await tx.add_events(self.events)
        return await tx.add_outbox(self.messages)
