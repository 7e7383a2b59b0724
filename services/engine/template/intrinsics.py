"""Pure implementations of the HOT value functions on lists and maps, and helpers.

String functions (list_join, str_replace, make_url, ...) are in `strings.py`.
Called by the compiler (`compiler.py`) to fold calls whose arguments are known
when the stack is loaded, and by resolution (`resolve.py`) for calls that
need resource attributes known only when a resource is checked. Each takes
the fully resolved arguments and returns a JSON value, or raises
`FunctionArgError` with a message; the caller adds the template path.
Behaviour follows Heat's functions of the same names.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

from services.engine.template.errors import FunctionArgError
from services.engine.template.versions import TemplateVersion

Impl = Callable[[Any, TemplateVersion], Any]


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def require_list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise FunctionArgError(f"{what} must be a list, not {kind(value)}")
    return value


def require_str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise FunctionArgError(f"{what} must be a string, not {kind(value)}")
    return value


def require_map(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise FunctionArgError(f"{what} must be a map, not {kind(value)}")
    return value


def kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a map"
    return type(value).__name__


# --- repeat ----------------------------------------------------------------


def _substitute(template: Any, pairs: list[tuple[str, str]]) -> Any:
    if isinstance(template, str):
        for key, value in pairs:
            template = template.replace(key, value)
        return template
    if isinstance(template, list):
        return [_substitute(item, pairs) for item in template]
    if isinstance(template, dict):
        return {_substitute(k, pairs): _substitute(v, pairs) for k, v in template.items()}
    return template


def _repeat_value(value: Any, var: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    raise FunctionArgError(f"values of {var!r} must be strings or numbers, not {kind(value)}")


def repeat(args: Any, version: TemplateVersion) -> list[Any]:
    args = require_map(args, "arguments")
    allowed = {"for_each", "template"} | ({"permutations"} if version.repeat_permutations else set())
    if not {"for_each", "template"} <= set(args) or not set(args) <= allowed:
        raise FunctionArgError(
            "expected a map with the keys 'for_each' and 'template'"
            + (" (and optionally 'permutations')" if version.repeat_permutations else "")
        )
    for_each = require_map(args["for_each"], "for_each")
    if not for_each:
        raise FunctionArgError("for_each must name at least one variable")
    permutations = args.get("permutations", True)
    if not isinstance(permutations, bool):
        raise FunctionArgError("permutations must be a boolean")
    keys: list[str] = []
    lists: list[list[str]] = []
    for var, values in for_each.items():
        if not isinstance(var, str):
            raise FunctionArgError("for_each variables must be strings")
        if values is None:
            values = []
        elif isinstance(values, dict) and version.repeat_over_map and permutations:
            values = list(values)
        values = require_list(values, f"the values of {var!r}")
        keys.append(var)
        lists.append([_repeat_value(v, var) for v in values])
    if permutations:
        combos: Any = itertools.product(*lists)
    else:
        if len({len(lst) for lst in lists}) > 1:
            raise FunctionArgError("with permutations false, all for_each lists must be equally long")
        combos = zip(*lists, strict=True)
    template = args["template"]
    return [_substitute(template, list(zip(keys, combo, strict=True))) for combo in combos]


# --- maps and lists ------------------------------------------------------------


def map_merge(args: Any, version: TemplateVersion) -> dict[str, Any]:
    args = require_list(args, "arguments")
    merged: dict[str, Any] = {}
    for item in args:
        if item is None:
            continue
        merged.update(require_map(item, "each merged item"))
    return merged


def map_replace(args: Any, version: TemplateVersion) -> dict[str, Any]:
    args = require_list(args, "arguments")
    if len(args) != 2:
        raise FunctionArgError("expected [<map>, {keys: <map>, values: <map>}]")
    source = {} if args[0] is None else require_map(args[0], "the input map")
    replacements = {} if args[1] is None else require_map(args[1], "the replacements")
    unknown = sorted(set(replacements) - {"keys", "values"})
    if unknown:
        raise FunctionArgError(f"unknown replacement kind(s) {', '.join(unknown)} (keys, values)")
    keys = require_map(replacements.get("keys") or {}, "keys")
    values = require_map(replacements.get("values") or {}, "values")
    out: dict[str, Any] = {}
    for key, value in source.items():
        new_key = keys.get(key)
        if new_key is None:
            new_key = key
        elif not isinstance(new_key, str):
            raise FunctionArgError(f"replacement for key {key!r} must be a string")
        elif new_key in source and new_key != key:
            raise FunctionArgError(f"key replacement {new_key!r} collides with a key in the input map")
        elif new_key in out:
            raise FunctionArgError(f"key replacement {new_key!r} collides with a key in the output map")
        lookup = _value_key(value)
        out[new_key] = values[lookup] if lookup is not None and lookup in values else value
    return out


def _value_key(value: Any) -> str | None:
    """The map key a scalar value is written as (map keys are always strings)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return None


def _concat_lists(args: Any) -> list[Any]:
    args = require_list(args, "arguments")
    out: list[Any] = []
    for item in args:
        if item is None:
            continue
        out.extend(require_list(item, "each concatenated item"))
    return out


def list_concat(args: Any, version: TemplateVersion) -> list[Any]:
    return _concat_lists(args)


def list_concat_unique(args: Any, version: TemplateVersion) -> list[Any]:
    # Heat's order: of repeated items the last occurrence is kept (earlier
    # ones are deleted while walking the list), so mirror that walk exactly.
    out = _concat_lists(args)
    for item in out:
        while out.count(item) > 1:
            del out[out.index(item)]
    return out


def contains(args: Any, version: TemplateVersion) -> bool:
    args = require_list(args, "arguments")
    if len(args) != 2:
        raise FunctionArgError("expected [<value>, <list>]")
    value, sequence = args
    if isinstance(sequence, str):
        return isinstance(value, str) and value in sequence
    return value in require_list(sequence, "the sequence")


def filter_(args: Any, version: TemplateVersion) -> list[Any]:
    args = require_list(args, "arguments")
    if len(args) != 2:
        raise FunctionArgError("expected [<values to remove>, <list>]")
    values, sequence = args
    if not sequence:
        return sequence  # type: ignore[no-any-return]
    sequence = require_list(sequence, "the sequence")
    if not values:
        return sequence
    remove = require_list(values, "the values to remove")
    return [item for item in sequence if item not in remove]


def equals(args: Any, version: TemplateVersion) -> bool:
    args = require_list(args, "arguments")
    if len(args) != 2:
        raise FunctionArgError("expected [<value 1>, <value 2>]")
    return bool(args[0] == args[1])
