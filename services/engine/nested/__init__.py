"""Nested stacks, decoupled: each child stack is an independent stack.

Flow. A resource of a nested type (`core.nesting.is_nested`) is checked like
any resource (`convergence.issuing`), but its job goes to the engine queue as a
`NestedStackJob` instead of to the workers. Whichever engine takes it
(`children.Children.start`) starts the child's operation — create, update,
delete, check, suspend or resume, through the same traversal code as any
stack — in one transaction, recording on the child stack row its parent
(stack, resource) and the parent's job. The child's checks then spread over
all engines like any stack's. When the child's operation ends, the
transaction that records its outcome also emits a `JobResult` for the
parent's job (`answer.Answers.stack_ended`), with the child's id as physical
id and the attributes from its outputs; the parent propagates it like any
job result. Nothing polls, and no lock is shared between parent and child.

A newer parent traversal never waits for a nested job in flight: it issues
its own job, whose child operation preempts the old one; only the latest job
is answered. Cancelling the parent cancels children in progress
(`CancelNested`, one message per child, each cancelling its own children).
"""
