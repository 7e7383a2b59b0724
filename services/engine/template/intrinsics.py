"""Pure implementations of the HOT value functions on lists and maps, and helpers.

String functions (list_join, str_replace, make_url, ...) are in `strings.py`.
Called by the compiler (`compiler.py`) to fold calls whose arguments are known
when the stack is loaded, and by resolution (`resolve.py`) for calls that
need resource attributes known only when a resource is checked. Each takes
the fully resolved arguments, the template version and the request's
evaluation `Budget`, and returns a JSON value, or raises `FunctionArgError`
with a message (the caller adds the template path). Behaviour follows Heat's
functions of the same names.

Every function charges the budget for what it produces before (or while) it
produces it, and runs in time linear in its input and output: repeat counts
its product before building it; list functions use hashable stand-ins of the
items (equal exactly when the items are, as Python's `==` decides for
Heat) instead of comparing every pair.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Hashable
from typing import Any

from services.engine.template.errors import FunctionArgError
from services.engine.template.limits import Budget
from services.engine.template.versions import TemplateVersion

Impl = Callable[[Any, TemplateVersion, Budget], Any]


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


# --- sizes and stand-ins --------------------------------------------------------


def measure(value: Any) -> tuple[int, int]:
    """(nodes, characters of strings) in a JSON value; keys count as characters."""
    nodes, chars = 0, 0
    pending = [value]
    while pending:
        item = pending.pop()
        nodes += 1
        if isinstance(item, str):
            chars += len(item)
        elif isinstance(item, dict):
            chars += sum(len(k) for k in item)
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return nodes, chars


_MAP, _LIST = 0, 1


def stand_in(value: Any, budget: Budget) -> Hashable:
    """A hashable value equal (==, same hash) to another's exactly when the values are
    equal as Python compares them, as Heat's list functions do (so 1 == 1.0 == True,
    and {"a": 1} == {"a": True}); containers cost the budget one item per entry."""
    if isinstance(value, dict):
        budget.charge(items=len(value))
        return (_MAP, frozenset((k, stand_in(v, budget)) for k, v in value.items()))
    if isinstance(value, list):
        budget.charge(items=len(value))
        return (_LIST, tuple(stand_in(v, budget) for v in value))
    return value  # type: ignore[no-any-return]


# --- repeat ----------------------------------------------------------------


def _substitute(template: Any, pairs: list[tuple[str, str]], budget: Budget) -> Any:
    if isinstance(template, str):
        for key, value in pairs:
            if not key:
                continue
            budget.search(len(template))
            found = template.count(key)
            if not found:
                continue
            # The template's own characters were paid for with the product; what grows is not.
            budget.charge(chars=max(found * (len(value) - len(key)), 0))
            template = template.replace(key, value)
        return template
    if isinstance(template, list):
        return [_substitute(item, pairs, budget) for item in template]
    if isinstance(template, dict):
        return {_substitute(k, pairs, budget): _substitute(v, pairs, budget) for k, v in template.items()}
    return template


def _repeat_value(value: Any, var: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    raise FunctionArgError(f"values of {var!r} must be strings or numbers, not {kind(value)}")


def repeat(args: Any, version: TemplateVersion, budget: Budget) -> list[Any]:
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
        count = math.prod(len(lst) for lst in lists)
        combos: Any = itertools.product(*lists)
    else:
        if len({len(lst) for lst in lists}) > 1:
            raise FunctionArgError("with permutations false, all for_each lists must be equally long")
        count = len(lists[0])
        combos = zip(*lists, strict=True)
    template = args["template"]
    # The whole product is paid for before any of it is built.
    nodes, chars = measure(template)
    budget.charge(items=count * nodes, chars=count * chars)
    return [_substitute(template, list(zip(keys, combo, strict=True)), budget) for combo in combos]


# --- maps and lists ------------------------------------------------------------


def map_merge(args: Any, version: TemplateVersion, budget: Budget) -> dict[str, Any]:
    args = require_list(args, "arguments")
    maps = [require_map(item, "each merged item") for item in args if item is not None]
    budget.charge(items=sum(len(m) for m in maps))
    merged: dict[str, Any] = {}
    for item in maps:
        merged.update(item)
    return merged


def map_replace(args: Any, version: TemplateVersion, budget: Budget) -> dict[str, Any]:
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
    budget.charge(items=len(source))
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


def _concat_lists(args: Any, budget: Budget) -> list[Any]:
    args = require_list(args, "arguments")
    lists = [require_list(item, "each concatenated item") for item in args if item is not None]
    budget.charge(items=sum(len(lst) for lst in lists))
    out: list[Any] = []
    for item in lists:
        out.extend(item)
    return out


def list_concat(args: Any, version: TemplateVersion, budget: Budget) -> list[Any]:
    return _concat_lists(args, budget)


def list_concat_unique(args: Any, version: TemplateVersion, budget: Budget) -> list[Any]:
    # Heat's order: of repeated items the first occurrence is kept.
    seen: set[Hashable] = set()
    out: list[Any] = []
    for item in _concat_lists(args, budget):
        key = stand_in(item, budget)
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def contains(args: Any, version: TemplateVersion, budget: Budget) -> bool:
    args = require_list(args, "arguments")
    if len(args) != 2:
        raise FunctionArgError("expected [<value>, <list>]")
    value, sequence = args
    if isinstance(sequence, str):
        budget.search(len(sequence))
        return isinstance(value, str) and value in sequence
    return value in require_list(sequence, "the sequence")


def filter_(args: Any, version: TemplateVersion, budget: Budget) -> list[Any]:
    args = require_list(args, "arguments")
    if len(args) != 2:
        raise FunctionArgError("expected [<values to remove>, <list>]")
    values, sequence = args
    if not sequence:
        return sequence  # type: ignore[no-any-return]
    sequence = require_list(sequence, "the sequence")
    if not values:
        return sequence
    remove = {stand_in(v, budget) for v in require_list(values, "the values to remove")}
    budget.charge(items=len(sequence))
    return [item for item in sequence if stand_in(item, budget) not in remove]


def equals(args: Any, version: TemplateVersion, budget: Budget) -> bool:
    args = require_list(args, "arguments")
    if len(args) != 2:
        raise FunctionArgError("expected [<value 1>, <value 2>]")
    return bool(args[0] == args[1])
