"""Messages engines send each other on the `engine` queue.

`CheckResource` triggers the check of one node of one traversal. Whichever
engine takes it does the work: that is how checks spread over all engines.
It carries only identities; the data a check needs is read from the rows of
the resources it depends on, so no message grows with the stack.
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
