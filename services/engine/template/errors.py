"""Template errors: how the template layer reports what is wrong and where.

Every check in this package appends `(path, message)` pairs to an
`ErrorList` instead of raising at the first problem; the public entry points
raise one `TemplateInvalid` carrying all of them, so a user fixes a template
in one round trip. Errors found while resolving a resource lazily (at check
time, when real attribute values are known) raise `ResolutionError`.
Both are `InvalidInput`: the user's input is wrong and nothing was changed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from shared.errors import InvalidInput

#: How many errors the summary message lists before "... and N more".
_SUMMARY_ERRORS = 5


class TemplateError(NamedTuple):
    """One problem: where (`resources.web.properties.image`) and what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class TemplateInvalid(InvalidInput):
    """The template (or environment, or parameters) is invalid.

    `errors` holds every problem found, in the order they were found.
    """

    def __init__(self, errors: Iterable[TemplateError]) -> None:
        self.errors: tuple[TemplateError, ...] = tuple(errors)
        shown = "; ".join(str(e) for e in self.errors[:_SUMMARY_ERRORS])
        extra = len(self.errors) - _SUMMARY_ERRORS
        if extra > 0:
            shown += f"; ... and {extra} more"
        count = len(self.errors)
        noun = "error" if count == 1 else "errors"
        first = self.errors[0].path if self.errors else ""
        super().__init__(f"template is invalid ({count} {noun}): {shown}")
        # InvalidInput joins path and message; keep the first place for callers
        # that only look at one.
        self.path = first


class ResolutionError(InvalidInput):
    """A function could not be evaluated with the values known at check time."""


class BudgetExceeded(ResolutionError):
    """Evaluating would produce more than the request's budget allows (`limits.Budget`).

    Raised without a path where the output is produced; the first caller that
    knows the function and the template path re-raises it `located` there, so
    the user reads e.g. `resources.v.properties.value.str_replace: str_replace
    would produce ...`. Not collected with other errors: evaluation stops.
    """

    def located(self, path: str, function: str) -> BudgetExceeded:
        if self.path:
            return self
        return BudgetExceeded(f"{function} {self.reason}", path=path)


class FunctionArgError(Exception):
    """Raised by an intrinsic function's implementation; the caller adds the path.

    Internal only: never escapes this package (it is turned into a
    `TemplateError` or a `ResolutionError`).
    """


class ErrorList:
    """Collects `(path, message)` errors while a template is checked."""

    __slots__ = ("_errors",)

    def __init__(self) -> None:
        self._errors: list[TemplateError] = []

    def add(self, path: str, message: str) -> None:
        self._errors.append(TemplateError(path, message))

    def __len__(self) -> int:
        return len(self._errors)

    def __bool__(self) -> bool:
        return bool(self._errors)

    @property
    def errors(self) -> tuple[TemplateError, ...]:
        return tuple(self._errors)

    def raise_if_any(self) -> None:
        if self._errors:
            raise TemplateInvalid(self._errors)


def join_path(base: str, key: str | int) -> str:
    """`resources.web` + `properties` -> `resources.web.properties`; ints index."""
    if isinstance(key, int):
        return f"{base}[{key}]"
    return f"{base}.{key}" if base else key
