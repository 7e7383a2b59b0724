"""Messages engines send each other about child stacks (on the `engine` queue).

`NestedStackJob` is a parent resource's job of a nested type: run it as an
operation of the child stack. `CancelNested` stops the child operation that
answers one parent job. Both carry identities only; the handler reads the
rest (the job's properties and template) from the parent's row.
"""

from __future__ import annotations

import uuid

from shared.messages import Message
from shared.protocol import JobAction


class NestedStackJob(Message):
    kind = "engine.nested_job"

    job_id: str
    stack_id: uuid.UUID  # the parent stack
    resource_id: int  # the parent's resource row whose job this is
    action: JobAction


class CancelNested(Message):
    kind = "engine.nested_cancel"

    stack_id: uuid.UUID  # the child stack
    job_id: str  # the parent's job its operation answers: only that operation is stopped
