"""Convergence decisions: pure functions, no I/O.

`model` (records and states) -> `graph` (the traversal graph of an
operation) -> `decide` (what checking a node does, what a job result does).
The async shell in `services.engine.convergence` loads the records, calls
these, and commits what they return in one transaction.
"""
