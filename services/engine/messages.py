"""Messages engines send each other on the `engine` queue.

`CheckResource` triggers the check of one node of one traversal. Whichever
engine takes it does the work: that is how checks spread over all engines.
It carries only identities; the data a check needs is read from the rows of
the resources it depends on, so no message grows with the stack.
`StartTraversal` finishes starting an update's traversal (its graph and first
checks) after the update's request has made it the stack's.
"""

from __future__ import annotations

import uuid

from shared.messages import Message


class CheckResource(Message):
    kind = "engine.check"

    stack_id: uuid.UUID
    traversal_id: uuid.UUID
    node: int  # resource_id * 2 + 1 forward, * 2 cleanup (of the graph)
    resource_id: int  # the row to act on; differs from the node's for a replacement


class StartTraversal(Message):
    """Store the graph of a traversal an update has made its stack's and trigger its
    leaves (`traversal.start_reserved`). The update's request preempts at once and
    leaves this, the part that grows with the stack, to whichever engine takes it."""

    kind = "engine.start_traversal"

    stack_id: uuid.UUID
    traversal_id: uuid.UUID
