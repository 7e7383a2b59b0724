"""The `yaql` function: a YAQL expression evaluated on template data, as Heat does.

`yaql: {expression: <string>, data: <value>}` evaluates the expression with
the `yaql` library, the data bound as `$.data` (Heat's context: the
standard library, CamelCase names, no delegates). Used by the compiler as a
value function (folded at load time when its data is known, else a `Call`
resolved at check time) and by `conditions` as a condition function
(2017-09-01 and later). Pure: no I/O; the limits come with the request's
`Budget` (its `TemplateLimits`):

- the expression is at most `max_yaql_expression_length` characters
  (checked before it is parsed; parsed statements are cached per process);
- yaql's own limits, as Heat's `[yaql]` options: `yaql_limit_iterators`
  (the most items a collection in the evaluation may have) and
  `yaql_memory_quota` (the most bytes one intermediate result may take);
- every yaql function call charges the budget one item, and the result
  (items and string characters) is charged like any function's output, so
  an expression's work and output count against the request's evaluation
  budget (`BudgetExceeded` names the path); the time is bounded where it
  runs: in a template worker (`template_pool`), loads and check-time
  resolutions whose values need yaql are stopped past
  CONVERGE_TEMPLATE_TIMEOUT_SECONDS.

A bad expression, a failing evaluation or a result that is not JSON data
raises `FunctionArgError` (the caller adds the template path).
"""

from __future__ import annotations

import collections.abc  # noqa: F401  (yaql 3.2 uses collections.abc without importing it)
import functools
from collections.abc import Mapping
from typing import Any

import yaql
from yaql.language import contexts, conventions
from yaql.language import exceptions as yaql_errors
from yaql.language import utils as yaql_utils

from services.engine.template.errors import FunctionArgError
from services.engine.template.expr import Expr
from services.engine.template.intrinsics import kind, measure, require_map
from services.engine.template.limits import SETTINGS, Budget
from services.engine.template.versions import TemplateVersion

USAGE = "yaql: {expression: <yaql expression>, data: <value>}"

#: Errors an evaluation may end with besides yaql's own: its standard library calls
#: Python's (int("x"), 1/0, a missing key or index, a value of the wrong type).
_EVALUATION_ERRORS = (yaql_errors.YaqlException, ArithmeticError, LookupError, TypeError, ValueError)


class _MeteredContext(contexts.Context):  # type: ignore[misc]
    """A yaql context that charges `meter` one item per function call it dispatches.

    yaql makes every child context as `type(parent)(parent)`, so the children
    of an evaluation's context inherit its meter."""

    def __init__(
        self, parent_context: Any = None, data: Any = yaql_utils.NO_VALUE, convention: Any = None
    ) -> None:
        super().__init__(parent_context, data, convention)
        self.meter: Budget | None = getattr(parent_context, "meter", None)

    def collect_functions(self, name: Any, predicate: Any = None, use_convention: bool = False) -> Any:
        if self.meter is not None:
            self.meter.charge(items=1)
        return super().collect_functions(name, predicate, use_convention)


@functools.lru_cache(maxsize=4)
def _engine(limit_iterators: int, memory_quota: int) -> Any:
    options = {"yaql.limitIterators": limit_iterators, "yaql.memoryQuota": memory_quota}
    return yaql.YaqlFactory().create(options)


@functools.lru_cache(maxsize=1)
def _root_context() -> Any:
    root = _MeteredContext(convention=conventions.CamelCaseConvention())
    return yaql.create_context(context=root)


@functools.lru_cache(maxsize=512)
def _parse(expression: str, limit_iterators: int, memory_quota: int) -> Any:
    try:
        return _engine(limit_iterators, memory_quota)(expression)
    except yaql_errors.YaqlException as exc:
        raise FunctionArgError(f"Bad expression {exc}") from None


def split_args(args: Any) -> tuple[Any, Any]:
    """(expression, data) of yaql's arguments, which may still hold unresolved parts."""
    if not isinstance(args, Mapping):
        raise FunctionArgError(f"arguments must be a map, not {kind(args)}; usage: {USAGE}")
    unknown = sorted(set(args) - {"expression", "data"})
    if "expression" not in args or unknown:
        wrong = f" (unknown: {', '.join(map(str, unknown))})" if unknown else ""
        raise FunctionArgError(f"expected the keys 'expression' and optionally 'data'{wrong}; usage: {USAGE}")
    return args["expression"], args.get("data", {})


def parse(expression: Any, budget: Budget) -> Any:
    """The parsed statement of `expression` (checked: a string within the length limit)."""
    if not isinstance(expression, str):
        raise FunctionArgError(f"the expression must be a string, not {kind(expression)}")
    limits = budget.limits
    if len(expression) > limits.max_yaql_expression_length:
        raise FunctionArgError(
            f"the expression is {len(expression)} characters long, more than the "
            f"{limits.max_yaql_expression_length} allowed (raise it with "
            f"{SETTINGS['max_yaql_expression_length']})"
        )
    return _parse(expression, limits.yaql_limit_iterators, limits.yaql_memory_quota)


def check_known(args: Any, budget: Budget) -> None:
    """What can be checked before the data is known: the keys, and the expression
    when it is given (as Heat's validate parses it)."""
    expression, _ = split_args(args)
    if not isinstance(expression, Expr):  # else it is known only later
        parse(expression, budget)


def yaql_eval(args: Any, version: TemplateVersion, budget: Budget) -> Any:
    """Heat's `yaql`: the expression's value on `{data: <data>}`, as JSON data."""
    expression, data = split_args(require_map(args, "arguments"))
    statement = parse(expression, budget)
    context = _root_context().create_child_context()
    context.meter = budget
    try:
        result = statement.evaluate({"data": data}, context)
    except yaql_errors.CollectionTooLargeException:
        raise FunctionArgError(_limit("a collection", "yaql_limit_iterators", budget)) from None
    except yaql_errors.MemoryQuotaExceededException:
        raise FunctionArgError(_limit("a value", "yaql_memory_quota", budget, " bytes")) from None
    except _EVALUATION_ERRORS as exc:
        raise FunctionArgError(
            f"evaluating {expression!r:.200} failed: {type(exc).__name__}: {exc}"
        ) from None
    finally:
        context.meter = None
    value = _json(result)
    nodes, chars = measure(value)
    budget.charge(items=nodes, chars=chars)
    return value


def _limit(what: str, field: str, budget: Budget, unit: str = " items") -> str:
    limit = getattr(budget.limits, field)
    return (
        f"{what} in the evaluation exceeded yaql's limit of {limit}{unit} (as Heat's [yaql] "
        f"{field.removeprefix('yaql_')}; raise it with {SETTINGS[field]})"
    )


def _json(value: Any) -> Any:
    """yaql's result as JSON data: tuples and sets become lists; other types are refused."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise FunctionArgError(f"the result has a map key that is not a string: {key!r:.60}")
            out[key] = _json(item)
        return out
    if isinstance(value, list | tuple):
        return [_json(item) for item in value]
    if isinstance(value, set | frozenset):
        items = [_json(item) for item in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    raise FunctionArgError(f"the result is not JSON data: it holds a {type(value).__name__} ({value!r:.60})")
