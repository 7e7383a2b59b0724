"""The one error tree. The type says what the caller should do.

- `TransientError`: try again later (connection lost, timeout, 429/5xx).
- `PermanentError`: retrying cannot help; fail the operation with the message.
- `ConflictError`: the state changed under us (lost a compare-and-swap).
- `InvalidInput`: user input is wrong; nothing was changed. Carries the place
  (`resources.web.properties.image`) so the message names where.
- `NotFound`: no such thing, or not visible to the caller.
- `Forbidden`: the caller is known but its role does not allow this.

Driver errors (asyncpg, aio-pika, aiohttp) are wrapped at their gateway with
`raise ... from exc`; core code only ever sees these types.
"""

from __future__ import annotations


class ConvergeError(Exception):
    """Root of every error Converge raises on purpose.

    Pickles as it is (message and every attribute, whatever the subclass's
    constructor takes), so an error raised in a worker process (the template
    pool) reaches the caller unchanged.
    """

    def __reduce__(self) -> tuple[object, ...]:
        return (_restore, (type(self), self.args, dict(self.__dict__)))


def _restore(cls: type[ConvergeError], args: tuple[object, ...], state: dict[str, object]) -> ConvergeError:
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class TransientError(ConvergeError):
    """Retrying after a pause may succeed."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PermanentError(ConvergeError):
    """Retrying will not help."""


class ConflictError(ConvergeError):
    """Someone else changed the state first; re-read and decide again."""


class InvalidInput(PermanentError):
    """User input is wrong. `path` names where, e.g. `resources.web.properties`."""

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.reason = message


class NotFound(PermanentError):
    """The thing asked for does not exist (or is not visible to the caller)."""


class Forbidden(PermanentError):
    """The caller is known but may not do this (a read-only role, a token with no usable role)."""


class ConfigError(PermanentError):
    """A setting (environment variable) has a bad value."""


class BusError(TransientError):
    """The message bus could not take or deliver a message (broker down, nack)."""


class MessageRejected(PermanentError):
    """A message cannot be processed by any consumer (unknown kind, bad body)."""


class Abandoned(ConvergeError):
    """A handler gave its message back unfinished (shutting down); deliver it again
    elsewhere. Not a failure: it never counts towards dead-lettering."""


class StoreUnavailable(TransientError):
    """The database cannot be reached right now."""
