"""Document loading: bytes from the API -> plain JSON-like Python data.

First step of the flow (loader -> template/environment -> stack). Accepts
YAML or JSON text (JSON is parsed with `json` when it starts with `{`), or an
already parsed mapping. Enforces `TemplateLimits` before anything else looks at
the data: document size, nesting depth, and YAML alias expansion, which is
counted while the document is composed so an alias bomb ("billion laughs") is
refused after reading a few hundred nodes. An alias counts as the nodes and
the bytes of what it repeats: the document as expanded (what is stored, and
what the compiler walks) must fit `max_template_bytes` too, and the repeats
are charged to the request's evaluation `Budget`. A mapping given directly
is measured while it is walked, never by serialising it first. Unquoted YAML
dates such as `2015-10-15` stay strings, as in Heat's loader.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml
from yaml._yaml import CParser as _EventParser
from yaml.constructor import SafeConstructor
from yaml.events import (
    AliasEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import ScalarNode
from yaml.resolver import Resolver

from services.engine.template.errors import BudgetExceeded
from services.engine.template.limits import SETTINGS, Budget, TemplateLimits


class DocumentError(Exception):
    """A document cannot be loaded; the message says why (no path prefix)."""


_SCALAR_TAGS = frozenset(
    {
        "tag:yaml.org,2002:str",
        "tag:yaml.org,2002:int",
        "tag:yaml.org,2002:float",
        "tag:yaml.org,2002:bool",
        "tag:yaml.org,2002:null",
        "tag:yaml.org,2002:timestamp",
        "tag:yaml.org,2002:value",
    }
)
_AS_STRING = frozenset({"tag:yaml.org,2002:str", "tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:value"})
_MERGE_TAG = "tag:yaml.org,2002:merge"
# Plain scalars starting with any other character are always strings (YAML
# 1.1 implicit types, as PyYAML's resolver keys them by first character).
_MAYBE_TYPED = frozenset("0123456789+-.~nNtTfFyYoO<=")


class _Scalars(SafeConstructor, Resolver):
    """PyYAML's own resolver and constructor, used for non-trivial scalars."""

    def __init__(self) -> None:
        SafeConstructor.__init__(self)
        Resolver.__init__(self)

    def value(self, event: ScalarEvent) -> tuple[Any, bool]:
        """(value, is_merge_key) of a scalar event."""
        text = event.value
        tag = event.tag
        if tag is None or tag == "!":
            plain = event.implicit[0] and tag is None
            if not plain or not text or text[0] not in _MAYBE_TYPED:
                if plain and not text:
                    return None, False
                return text, False
            tag = self.resolve(ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
        if tag == _MERGE_TAG:
            return "<<", True
        if tag not in _SCALAR_TAGS:
            raise DocumentError(f"unsupported YAML tag {tag}")
        if tag in _AS_STRING:
            return text, False  # unquoted dates stay strings, as in Heat
        node = ScalarNode(tag, text)
        return self.yaml_constructors[tag](self, node), False


class _Open:
    """A collection being built from events."""

    __slots__ = ("anchor", "key", "merges", "pending", "start", "value", "weight")

    def __init__(
        self, value: dict[str, Any] | list[Any], anchor: str | None, start: int, weight: int
    ) -> None:
        self.value = value
        self.anchor = anchor
        self.start = start
        self.weight = weight
        self.key: str | None = None
        self.pending = False  # a mapping key was read, its value not yet
        self.merges: list[dict[str, Any]] = []


def _parse_yaml(text: str, limits: TemplateLimits, budget: Budget, what: str) -> Any:
    """Build Python data straight from libyaml's events.

    Counts every node as it is created, and an alias as the nodes and bytes
    of what it repeats, so alias bombs stop at `max_yaml_nodes` (or at
    `max_template_bytes` expanded, or at the budget) without expanding
    anything; aliases share the anchored object (as PyYAML does).
    """
    parser = _EventParser(text)
    scalars = _Scalars()
    # anchor -> (value, nodes, bytes); None while it is still open
    anchors: dict[str, tuple[Any, int, int] | None] = {}
    stack: list[_Open] = []
    total = 0
    weight = 0  # bytes of the nodes so far: a scalar's length + 1, a collection 1
    expanded = len(text)  # the document's size with every alias written out
    aliases = 0
    result: Any = None
    documents = 0
    try:
        while True:
            event: Any = parser.get_event()
            kind = type(event)
            if kind is ScalarEvent:
                value, merge = scalars.value(event)
                total += 1
                weight += len(event.value) + 1
                if event.anchor is not None:
                    anchors[event.anchor] = (value, 1, len(event.value) + 1)
            elif kind is MappingStartEvent or kind is SequenceStartEvent:
                tag = event.tag
                if tag is not None and tag not in ("tag:yaml.org,2002:map", "tag:yaml.org,2002:seq", "!"):
                    raise DocumentError(f"unsupported YAML tag {tag}")
                if len(stack) >= limits.max_depth:
                    raise DocumentError(_too_deep(limits))
                if event.anchor is not None:
                    anchors[event.anchor] = None  # open: an alias to it is recursive
                total += 1
                weight += 1
                stack.append(_Open({} if kind is MappingStartEvent else [], event.anchor, total, weight))
                if total > limits.max_yaml_nodes:
                    raise DocumentError(_too_many(limits))
                continue
            elif kind is MappingEndEvent or kind is SequenceEndEvent:
                done = stack.pop()
                value = done.value
                if done.merges:
                    merged: dict[str, Any] = {}
                    for extra in done.merges:
                        merged.update(extra)
                    merged.update(value)
                    value = merged
                merge = False
                if done.anchor is not None:
                    anchors[done.anchor] = (value, total - done.start + 1, weight - done.weight + 1)
            elif kind is AliasEvent:
                aliases += 1
                if aliases > limits.max_yaml_aliases:
                    raise DocumentError(
                        f"too many YAML aliases (more than {limits.max_yaml_aliases}; "
                        "raise it with CONVERGE_MAX_YAML_ALIASES)"
                    )
                if event.anchor not in anchors:
                    raise DocumentError(f"undefined YAML alias *{event.anchor}")
                found = anchors[event.anchor]
                if found is None:
                    raise DocumentError(f"recursive YAML alias *{event.anchor}")
                value, size, repeated = found
                total += size
                weight += repeated
                expanded += repeated
                if expanded > limits.max_template_bytes:
                    raise DocumentError(
                        f"{what} expands to more than {limits.max_template_bytes} bytes with its YAML "
                        f"aliases (the maximum allowed size; raise it with {SETTINGS['max_template_bytes']})"
                    )
                try:
                    budget.charge(items=size, chars=repeated)
                except BudgetExceeded as exc:
                    raise DocumentError(
                        f"{what} expands to more than the evaluation budget allows with its YAML aliases: "
                        f"they {exc.reason}"
                    ) from None
                merge = False
            elif kind is DocumentStartEvent:
                documents += 1
                if documents > 1:
                    raise DocumentError("expected a single YAML document, found several")
                anchors.clear()
                continue
            elif kind is StreamEndEvent:
                return result
            else:  # StreamStart, DocumentEnd
                continue
            if total > limits.max_yaml_nodes:
                raise DocumentError(_too_many(limits))
            if not stack:
                result = value
                continue
            _add(stack[-1], value, merge)
    finally:
        parser.dispose()


def _add(parent: _Open, value: Any, merge: bool) -> None:
    container = parent.value
    if isinstance(container, list):
        container.append(value)
        return
    if not parent.pending:
        if merge:
            parent.key = None  # a `<<` merge key
        elif isinstance(value, str):
            parent.key = value
        elif isinstance(value, dict | list):
            raise DocumentError("map keys must be strings, not maps or lists")
        else:
            parent.key = _scalar_key(value)
        parent.pending = True
        return
    parent.pending = False
    key = parent.key
    if key is not None:
        container[key] = value
    elif isinstance(value, dict):
        parent.merges.append(value)
    elif isinstance(value, list) and all(isinstance(v, dict) for v in value):
        parent.merges.extend(reversed(value))  # earlier maps take precedence
    else:
        raise DocumentError("a '<<' merge key needs a map or a list of maps")


def _too_many(limits: TemplateLimits) -> str:
    return (
        f"document expands to more than {limits.max_yaml_nodes} nodes (YAML aliases; "
        "raise it with CONVERGE_MAX_YAML_NODES)"
    )


def _too_deep(limits: TemplateLimits) -> str:
    return (
        f"document is nested deeper than {limits.max_depth} levels "
        "(raise it with CONVERGE_MAX_DOCUMENT_DEPTH)"
    )


class _Meter:
    """Bytes a mapping may still take as compact JSON (measured while walking it)."""

    __slots__ = ("left", "what")

    def __init__(self, limit: int, what: str) -> None:
        self.left = limit
        self.what = what

    def take(self, size: int, limits: TemplateLimits) -> None:
        self.left -= size
        if self.left < 0:
            raise DocumentError(
                f"{self.what} size exceeds the maximum allowed size ({limits.max_template_bytes} bytes; "
                f"raise it with {SETTINGS['max_template_bytes']})"
            )


def _normalise(
    value: Any, limits: TemplateLimits, depth: int, strings: dict[str, str], meter: _Meter | None = None
) -> Any:
    """Return `value` as JSON-like data: str keys, no bytes/sets/dates; with a
    `meter`, count its size as compact JSON as it is copied. Equal strings become one
    object (`strings`: those seen so far), so a name the template repeats (a resource's,
    in every get_attr and depends_on naming it; a type's) is held once by what is
    compiled from it, and pickled once with it."""
    if depth > limits.max_depth:
        raise DocumentError(_too_deep(limits))
    if isinstance(value, dict):
        if meter is not None:
            meter.take(2 + len(value), limits)
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                key = _scalar_key(key)
            if meter is not None:
                meter.take(len(key) + 3, limits)
            out[strings.setdefault(key, key)] = _normalise(item, limits, depth + 1, strings, meter)
        return out
    if isinstance(value, list):
        if meter is not None:
            meter.take(2 + len(value), limits)
        return [_normalise(item, limits, depth + 1, strings, meter) for item in value]
    if isinstance(value, str):
        if meter is not None:
            meter.take(len(value) + 2, limits)
        return strings.setdefault(value, value)
    if value is None or isinstance(value, bool | int | float):
        if meter is not None:
            meter.take(5, limits)
        return value
    raise DocumentError(f"unsupported value of type {type(value).__name__}")


def _scalar_key(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    if isinstance(key, int | float):
        return str(key)
    raise DocumentError(f"map keys must be strings, found {type(key).__name__}")


def load_document(
    source: str | bytes | Mapping[str, Any],
    *,
    limits: TemplateLimits,
    what: str = "template",
    budget: Budget | None = None,
) -> dict[str, Any]:
    """Parse `source` into a dict, or raise `DocumentError` saying why.

    `budget` is the request's evaluation budget (YAML alias repeats are
    charged to it); without one the document gets its own.
    """
    if budget is None:
        budget = Budget(limits)
    if isinstance(source, Mapping):
        try:
            data: Any = _normalise(dict(source), limits, 1, {}, _Meter(limits.max_template_bytes, what))
        except RecursionError as exc:
            raise DocumentError(f"{what} is nested too deeply") from exc
        return data  # type: ignore[no-any-return]
    if isinstance(source, bytes):
        _check_size(len(source), limits, what)
        try:
            text = source.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DocumentError(f"{what} is not valid UTF-8") from exc
    elif isinstance(source, str):
        text = source
        # len(str) <= len(utf-8 bytes); encode only when it could matter.
        if len(text) * 4 > limits.max_template_bytes:
            _check_size(len(text.encode("utf-8", "surrogatepass")), limits, what)
    else:
        raise DocumentError(f"{what} must be a YAML or JSON document or a mapping")
    stripped = text.lstrip()
    try:
        is_json = False
        if stripped.startswith("{"):
            try:
                data = json.loads(text)
                is_json = True
            except json.JSONDecodeError:
                data = _parse_yaml(text, limits, budget, what)  # JSON-ish YAML flow mapping
        else:
            data = _parse_yaml(text, limits, budget, what)
    except yaml.YAMLError as exc:
        if "maximum nesting depth" in str(getattr(exc, "problem", "")):  # libyaml's own limit
            raise DocumentError(f"{what} is nested too deeply") from exc
        raise DocumentError(f"{what} is not valid YAML: {_yaml_reason(exc)}") from exc
    except RecursionError as exc:
        raise DocumentError(f"{what} is nested too deeply") from exc
    if not isinstance(data, dict):
        raise DocumentError(f"the {what} is not a JSON object or YAML mapping")
    if not is_json:
        return data  # built by _parse_yaml: already normalised and limited
    try:
        return _normalise(data, limits, 1, {})  # type: ignore[no-any-return]
    except RecursionError as exc:
        raise DocumentError(f"{what} is nested too deeply") from exc


def _check_size(size: int, limits: TemplateLimits, what: str) -> None:
    if size > limits.max_template_bytes:
        raise DocumentError(
            f"{what} size ({size} bytes) exceeds the maximum allowed size "
            f"({limits.max_template_bytes} bytes); raise it with {SETTINGS['max_template_bytes']}"
        )


def _yaml_reason(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is not None:
        return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"
    return str(problem)
