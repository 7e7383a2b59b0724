"""Stack operations: what the API asks of a stack, started or stopped in one transaction.

Flow: the API (and snapshot restore, the tests, the bench) calls `Operations`
(`changes`): create, update and delete load the new goal in the template pool
(`goals.load_goal`), then in one transaction store it and begin a traversal
(`traversal.begin_traversal`); check, suspend, resume, cancel and abandon keep
the goal (`actions`); an update's preview decides each resource as its check
would, writing nothing (`preview`). Why an operation is refused: `errors`.
What happens after an operation begins is the convergence's (the checks its
traversal queues).
"""

from services.engine.operations.changes import Operations, draft_stack, retrying
from services.engine.operations.errors import (
    ImmutableParameterModified,
    NotCancellable,
    Refused,
    StackExists,
    StackNotFound,
)

__all__ = [
    "ImmutableParameterModified",
    "NotCancellable",
    "Operations",
    "Refused",
    "StackExists",
    "StackNotFound",
    "draft_stack",
    "retrying",
]
