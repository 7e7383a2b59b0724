"""The convergence shell: engine messages read, decided by `core`, written.

Where it sits: the engine service hands node checks, job results and nested
stack jobs to `Convergence` (`handling`); what each does is decided by the pure
functions of `services.engine.core` and written in one transaction. The flow,
one module a step:

- `handling`: one transaction a message or a batch (claim, prefetch, settle,
  outbox); `expire_overdue` for operations past their timeout;
- `checks`: a node's check (forward, cleanup, a stack action), or its wait
  for an older job still running on its row, decided by `core.node_checks`
  and carried out (`carry_out`);
- `issuing`: a job recorded on its row and queued; `replacement`: a new row
  replacing a resource;
- `results`: a job's result, decided by `core.results.decide_result`;
  `reaping`: what a stale result created that no row owns is deleted;
- `propagation`: a node done (its dependents, sync points, its traversal's
  end) and a failed stack;
- `shell`: what all of them are handed (`Shell`: the engine's `deps.EngineDeps`,
  the gates and the nested-stack jobs), a node's `Check` context, and their
  compare-and-swap row writes.
"""

from services.engine.convergence.handling import Convergence

__all__ = ["Convergence"]
