"""Convergence decisions: pure functions, no I/O.

`model` (records and states; `row_change` the typed change of a row,
`sources` the injected clock and ids) -> `graph` (the traversal graph of an
operation) -> `gates` (what a node's check waits at) -> `decide` (what
checking a node does; the reason a failed job leaves) -> `node_checks`
(what that decision writes and what follows it: a job, a replacement, the
node done, the stack failed; a traversal's end) -> `results` (what a job's
result does to its row, its node and its stack). Beside them, one
module per concern: `drift`, `healing`, `nesting` (a child stack's goal in
`child_goals`, from `groups` and `chains`; what it passes back in
`child_attributes`), `nested_checks`, `ownership`, `quotas`, `recovery`,
`scaling`, `snapshots`, `updates`.
The async shell loads the records, calls these, and commits what they return
in one transaction: `services.engine.convergence` (node checks and job
results), `services.engine.operations` and `services.engine.traversal`
(starting an operation), and the modules named in each one's "Where it sits".
"""
