"""Why a stack operation is refused: the errors `Operations` raises.

Where it sits: raised before anything changes (or with the transaction rolled
back), and turned into Heat's JSON errors at the API edge by their place in
the error tree (`shared.errors`): a `Refused` operation is a conflict the
operation does not retry (409), a missing stack is 404, the others are
invalid input (400).
"""

from __future__ import annotations

from collections.abc import Sequence

from shared.errors import ConflictError, InvalidInput, NotFound


class Refused(ConflictError):
    """The stack's state does not allow this operation now (not retried)."""


class StackExists(Refused):
    """A live stack of that name exists in the project."""


class NotCancellable(InvalidInput):
    """Only a create or update in progress can be cancelled."""


class StackNotFound(NotFound):
    """No such stack (or not visible to this project)."""


class ImmutableParameterModified(InvalidInput):
    """An update gives an `immutable: true` parameter another value (400, as Heat)."""

    def __init__(self, names: Sequence[str]) -> None:
        super().__init__("The following parameters are immutable and may not be updated: " + ", ".join(names))
        self.names = tuple(names)
