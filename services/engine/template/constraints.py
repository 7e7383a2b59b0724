"""Parameter types and constraints: what a parameter's `constraints` list means.

Used by `parameters` (schema parsing and value checks) and by `validate_api`
(rendering constraints as Heat's validate call does). Which constraint
applies to which type follows Heat: length (string, list, json), range and
modulo (number), allowed_values (string, number, list, boolean),
allowed_pattern (string, whole-value match), custom_constraint (any).

`allowed_pattern` runs an untrusted pattern on an untrusted value, so it runs
on RE2 (`google-re2`), whose matching time is linear in the value whatever the
pattern: a pattern RE2 cannot run (backreferences, lookaround) or that needs
more than `_PATTERN_MEMORY` to compile is refused where it is written. In RE2,
the classes `\\w`, `\\d`, `\\s` and `\\b` are ASCII-only (Python's are Unicode).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Any

import re2

from services.engine.template.errors import ErrorList, join_path
from services.engine.template.versions import TemplateVersion


class ParamType(StrEnum):
    STRING = "string"
    NUMBER = "number"
    JSON = "json"
    COMMA_DELIMITED_LIST = "comma_delimited_list"
    BOOLEAN = "boolean"


class ConstraintKind(StrEnum):
    LENGTH = "length"
    RANGE = "range"
    MODULO = "modulo"
    ALLOWED_VALUES = "allowed_values"
    ALLOWED_PATTERN = "allowed_pattern"
    CUSTOM = "custom_constraint"


#: Which parameter types each constraint applies to (as in Heat).
_APPLIES_TO: dict[ConstraintKind, frozenset[ParamType]] = {
    ConstraintKind.LENGTH: frozenset({ParamType.STRING, ParamType.COMMA_DELIMITED_LIST, ParamType.JSON}),
    ConstraintKind.RANGE: frozenset({ParamType.NUMBER}),
    ConstraintKind.MODULO: frozenset({ParamType.NUMBER}),
    ConstraintKind.ALLOWED_VALUES: frozenset(
        {ParamType.STRING, ParamType.NUMBER, ParamType.COMMA_DELIMITED_LIST, ParamType.BOOLEAN}
    ),
    ConstraintKind.ALLOWED_PATTERN: frozenset({ParamType.STRING}),
    ConstraintKind.CUSTOM: frozenset(ParamType),
}


@dataclass(frozen=True)
class Constraint:
    """One parameter constraint. Fields unused by a kind stay None."""

    kind: ConstraintKind
    description: str | None = None
    min: float | None = None
    max: float | None = None
    step: int | None = None
    offset: int | None = None
    allowed: tuple[Any, ...] = ()
    pattern: str | None = None
    name: str | None = None  # custom constraint name

    def violation(self, value: Any, ptype: ParamType) -> str | None:
        """Why `value` breaks this constraint, or None. Custom: never checked here."""
        problem = self._problem(value, ptype)
        if problem is None:
            return None
        return self.description or problem

    def _problem(self, value: Any, ptype: ParamType) -> str | None:
        if self.kind is ConstraintKind.LENGTH:
            length = len(value)
            unit = "characters" if ptype is ParamType.STRING else "items"
            if (self.min is not None and length < self.min) or (self.max is not None and length > self.max):
                return f"length must be {_bounds(self.min, self.max)} {unit} (is {length})"
        elif self.kind is ConstraintKind.RANGE:
            if (self.min is not None and value < self.min) or (self.max is not None and value > self.max):
                return f"{value} is not {_bounds(self.min, self.max)}"
        elif self.kind is ConstraintKind.MODULO:
            assert self.step is not None
            assert self.offset is not None
            if value % self.step != self.offset:
                return f"{value} is not {self.offset} more than a multiple of {self.step}"
        elif self.kind is ConstraintKind.ALLOWED_VALUES:
            items = value if isinstance(value, list) else [value]
            allowed = self.allowed
            if ptype is ParamType.STRING or ptype is ParamType.COMMA_DELIMITED_LIST:
                allowed = tuple(str(a) for a in allowed)
            bad = [i for i in items if i not in allowed]
            if bad:
                shown = ", ".join(json.dumps(a) for a in self.allowed)
                return f"{json.dumps(bad[0])} is not an allowed value [{shown}]"
        elif self.kind is ConstraintKind.ALLOWED_PATTERN:
            assert self.pattern is not None
            if _pattern(self.pattern).fullmatch(value) is None:
                return f"{json.dumps(value)} does not match pattern {json.dumps(self.pattern)}"
        return None


#: Memory RE2 may use for one compiled pattern (its program and DFA cache).
_PATTERN_MEMORY = 8 * 1024 * 1024


@lru_cache(maxsize=256)
def _pattern(pattern: str) -> re2._Regexp[str]:
    """`pattern` compiled by RE2 (raises `re2.error` if it cannot be)."""
    options = re2.Options()
    options.log_errors = False  # the refusal is reported to the user, not to stderr
    options.max_mem = _PATTERN_MEMORY
    return re2.compile(pattern, options)


def pattern_problem(pattern: str) -> str | None:
    """Why RE2 cannot run `pattern`, or None."""
    try:
        _pattern(pattern)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        return str(reason)
    return None


def _bounds(lo: float | None, hi: float | None) -> str:
    if lo is not None and hi is not None:
        return f"between {_num(lo)} and {_num(hi)}"
    if lo is not None:
        return f"at least {_num(lo)}"
    return f"at most {_num(hi)}"


def _num(value: float | None) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def parse_constraints(
    raw: Any, ptype: ParamType, version: TemplateVersion, path: str, errors: ErrorList
) -> tuple[Constraint, ...]:
    if raw is None:
        return ()
    cpath = join_path(path, "constraints")
    if not isinstance(raw, list):
        errors.add(cpath, "must be a list")
        return ()
    out: list[Constraint] = []
    for index, item in enumerate(raw):
        ipath = join_path(cpath, index)
        constraint = _parse_constraint(item, version, ipath, errors)
        if constraint is None:
            continue
        if ptype not in _APPLIES_TO[constraint.kind]:
            errors.add(
                join_path(ipath, constraint.kind.value),
                f"{constraint.kind.value} constraint does not apply to a {ptype.value} parameter",
            )
            continue
        out.append(constraint)
    return tuple(out)


def _parse_constraint(item: Any, version: TemplateVersion, path: str, errors: ErrorList) -> Constraint | None:
    if not isinstance(item, dict):
        errors.add(path, "each constraint must be a map")
        return None
    description = item.get("description")
    if description is not None and not isinstance(description, str):
        errors.add(join_path(path, "description"), "must be a string")
        description = None
    kinds = [k for k in item if k != "description"]
    valid = {k.value for k in ConstraintKind}
    if not version.modulo_constraint:
        valid.discard(ConstraintKind.MODULO.value)
    if len(kinds) != 1 or kinds[0] not in valid:
        errors.add(
            path,
            f"a constraint must have exactly one of: {', '.join(sorted(valid))} "
            f"(found {', '.join(kinds) or 'none'})",
        )
        return None
    kind = ConstraintKind(kinds[0])
    body = item[kinds[0]]
    kpath = join_path(path, kind.value)
    if kind in (ConstraintKind.LENGTH, ConstraintKind.RANGE):
        if not isinstance(body, dict) or not body or not set(body) <= {"min", "max"}:
            errors.add(kpath, "must be a map with 'min' and/or 'max'")
            return None
        bounds: dict[str, float | None] = {}
        for key in ("min", "max"):
            value = body.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
                value = _number(value)
                if value is None:
                    errors.add(join_path(kpath, key), "must be a number")
                    return None
            bounds[key] = value
        lo, hi = bounds["min"], bounds["max"]
        if lo is not None and hi is not None and lo > hi:
            errors.add(kpath, "min must not be greater than max")
            return None
        return Constraint(kind, description, min=lo, max=hi)
    if kind is ConstraintKind.MODULO:
        if not isinstance(body, dict) or set(body) != {"step", "offset"}:
            errors.add(kpath, "must be a map with 'step' and 'offset'")
            return None
        step, offset = body["step"], body["offset"]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (step, offset)):
            errors.add(kpath, "step and offset must be integers")
            return None
        if step == 0 or abs(offset) >= abs(step) or (offset and (offset > 0) != (step > 0)):
            errors.add(kpath, "step must be non-zero and offset smaller than step, same sign")
            return None
        return Constraint(kind, description, step=step, offset=offset)
    if kind is ConstraintKind.ALLOWED_VALUES:
        if not isinstance(body, list) or not body:
            errors.add(kpath, "must be a non-empty list")
            return None
        return Constraint(kind, description, allowed=tuple(body))
    if kind is ConstraintKind.ALLOWED_PATTERN:
        if not isinstance(body, str):
            errors.add(kpath, "must be a string (a regular expression)")
            return None
        problem = pattern_problem(body)
        if problem is not None:
            errors.add(
                kpath,
                f"invalid regular expression: {problem} (patterns are RE2 regular expressions, matched "
                "in linear time: no backreferences or lookaround)",
            )
            return None
        return Constraint(kind, description, pattern=body)
    if not isinstance(body, str) or not body:
        errors.add(kpath, "must be the name of a custom constraint")
        return None
    return Constraint(kind, description, name=body)


def _number(value: Any) -> float | None:
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
        try:
            return float(value)
        except ValueError:
            return None
    return None
