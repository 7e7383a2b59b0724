"""Conditions: evaluated once per stack load, before any property is compiled.

`stack.load_stack` builds a `Conditions` from the template's `conditions`
section and the parameter values; the compiler asks it for each resource's
and output's `condition` and for the first argument of every `if`. Condition
expressions may use only the version's condition functions (get_param,
equals, not, and, or; contains and yaql from 2017-09-01; if from 2021-04-16); a
string names another condition.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from services.engine.template import intrinsics, yaql_function
from services.engine.template.errors import BudgetExceeded, ErrorList, FunctionArgError, join_path
from services.engine.template.limits import Budget
from services.engine.template.versions import ALL_FUNCTIONS, UNSUPPORTED_FUNCTIONS, TemplateVersion

PSEUDO_PARAMETERS = ("OS::stack_name", "OS::stack_id", "OS::project_id")


class _NoValue:
    def __repr__(self) -> str:
        return "NO_VALUE"

    def __reduce__(self) -> str:
        return "NO_VALUE"  # the one instance, also after pickling


#: get_param of a parameter that has no value (template-only validation).
NO_VALUE: Any = _NoValue()


@dataclass(frozen=True)
class ParamScope:
    """Parameter values visible to get_param (including pseudo parameters)."""

    values: Mapping[str, Any]
    pseudo: Mapping[str, str]
    declared: frozenset[str]  # declared in the template, value or not

    def get(self, args: Any) -> Any:
        """get_param's value; NO_VALUE for a declared parameter without one."""
        if isinstance(args, str):
            name, keys = args, []
        elif isinstance(args, list) and args and isinstance(args[0], str):
            name, keys = args[0], args[1:]
        else:
            raise FunctionArgError("expected <parameter name> or [<parameter name>, <key>, ...]")
        if name in self.values:
            value = self.values[name]
        elif name in self.pseudo:
            value = self.pseudo[name]
        elif name in self.declared:
            return NO_VALUE
        else:
            raise FunctionArgError(f"unknown parameter {name!r}")
        for key in keys:
            if isinstance(key, bool) or not isinstance(key, str | int):
                raise FunctionArgError("path components must be strings or integers")
            if isinstance(value, dict):
                if str(key) not in value:
                    return ""
                value = value[str(key)]
            elif isinstance(value, list):
                try:
                    index = int(key)
                except ValueError:
                    raise FunctionArgError(f"cannot index a list with {key!r}") from None
                if not -len(value) <= index < len(value):
                    return ""
                value = value[index]
            else:
                raise FunctionArgError(f"cannot follow path {key!r} into a scalar value")
        return value


class Conditions:
    """Evaluates named conditions (memoised) and inline condition expressions."""

    def __init__(
        self,
        definitions: Mapping[str, Any],
        *,
        version: TemplateVersion,
        scope: ParamScope,
        errors: ErrorList,
        budget: Budget | None = None,
    ) -> None:
        self._definitions = definitions
        self._budget = budget if budget is not None else Budget()
        self._version = version
        self._scope = scope
        self._errors = errors
        self._values: dict[str, bool] = {}
        self._evaluating: list[str] = []

    def evaluate_all(self) -> dict[str, bool]:
        for name in self._definitions:
            self.named(name, join_path("conditions", name))
        return dict(self._values)

    def named(self, name: str, path: str) -> bool:
        if name in self._values:
            return self._values[name]
        if name not in self._definitions:
            known = ", ".join(sorted(self._definitions)) or "none defined"
            self._errors.add(path, f"unknown condition {name!r} (known: {known})")
            return True
        if name in self._evaluating:
            loop = [*self._evaluating[self._evaluating.index(name) :], name]
            self._errors.add(join_path("conditions", name), "condition loop: " + " -> ".join(loop))
            return True
        self._evaluating.append(name)
        try:
            value = self.evaluate(self._definitions[name], join_path("conditions", name))
        finally:
            self._evaluating.pop()
        self._values[name] = value
        return value

    def evaluate(self, expr: Any, path: str) -> bool:
        """A condition: true/false, a condition name, or a condition function."""
        if isinstance(expr, str):
            return self.named(expr, path)
        value = self._value(expr, path)
        if value is NO_VALUE:
            return True
        if not isinstance(value, bool):
            self._errors.add(
                path,
                "a condition must be true/false, a condition name or a condition "
                f"function, not {value!r:.60}",
            )
            return True
        return value

    def _value(self, expr: Any, path: str) -> Any:
        if isinstance(expr, list):
            return [self._value(item, join_path(path, i)) for i, item in enumerate(expr)]
        if not isinstance(expr, dict):
            return expr
        if len(expr) != 1:
            return {k: self._value(v, join_path(path, k)) for k, v in expr.items()}
        ((fn, args),) = expr.items()
        fpath = join_path(path, fn)
        allowed = self._version.condition_functions
        if fn not in allowed:
            if fn in ALL_FUNCTIONS:
                self._errors.add(
                    fpath,
                    f"function {fn!r} is not allowed in a condition in version "
                    f"{self._version.date} (allowed: {', '.join(sorted(allowed))})",
                )
                return NO_VALUE
            return {fn: self._value(args, fpath)}
        if fn in UNSUPPORTED_FUNCTIONS:
            self._errors.add(fpath, UNSUPPORTED_FUNCTIONS[fn])
            return NO_VALUE
        try:
            return self._call(fn, args, fpath)
        except FunctionArgError as exc:
            self._errors.add(fpath, f"{fn}: {exc}")
            return NO_VALUE

    def _call(self, fn: str, args: Any, path: str) -> Any:
        if fn == "get_param":
            resolved = self._value(args, path)
            return self._scope.get(resolved)
        if fn == "not":
            return not self.evaluate(args, path)
        if fn in ("and", "or"):
            if not isinstance(args, list) or len(args) < 2:
                raise FunctionArgError("expected a list of at least two conditions")
            results = [self.evaluate(a, join_path(path, i)) for i, a in enumerate(args)]
            return all(results) if fn == "and" else any(results)
        if fn == "if":
            if not isinstance(args, list) or len(args) not in (2, 3):
                raise FunctionArgError("expected [<condition>, <value if true>, <value if false>]")
            chosen = self.evaluate(args[0], join_path(path, 0))
            if chosen:
                return self._value(args[1], join_path(path, 1))
            return self._value(args[2], join_path(path, 2)) if len(args) == 3 else None
        values = self._value(args, path)
        if _contains_no_value(values):
            return NO_VALUE
        if fn == "equals":
            return intrinsics.equals(values, self._version, self._budget)
        if fn == "contains":
            return intrinsics.contains(values, self._version, self._budget)
        if fn == "yaql":
            try:
                return yaql_function.yaql_eval(values, self._version, self._budget)
            except BudgetExceeded as exc:
                raise exc.located(path, fn) from None
        raise FunctionArgError(f"{fn} cannot be used in a condition")


def _contains_no_value(value: Any) -> bool:
    if value is NO_VALUE:
        return True
    if isinstance(value, list):
        return any(_contains_no_value(v) for v in value)
    if isinstance(value, dict):
        return any(_contains_no_value(v) for v in value.values())
    return False
