"""How results are printed: aligned tables (the default), JSON, YAML or bare values.

As `openstack stack ...` does it, a list prints one row per item under titled
columns (`ID`, `Stack Status`), and a single item prints a Field/Value table
under the API's own keys. `-c` picks columns by title or key; `-f json|yaml`
prints the same selection for scripts, `-f value` just the values.
Nothing here does I/O: renderers return text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import yaml

from services.cli.client import CliError


class Format(StrEnum):
    TABLE = "table"
    JSON = "json"
    YAML = "yaml"
    VALUE = "value"


@dataclass(frozen=True)
class Column:
    title: str  # shown in tables and used as the key in JSON/YAML lists
    key: str  # the API's field


@dataclass(frozen=True)
class Output:
    fmt: Format = Format.TABLE
    columns: tuple[str, ...] = ()  # -c: wanted titles or keys; empty = all

    def rows(self, items: Sequence[Mapping[str, Any]], columns: Sequence[Column]) -> str:
        chosen = self._choose(columns)
        if self.fmt is Format.TABLE:
            return table([c.title for c in chosen], [[item.get(c.key) for c in chosen] for item in items])
        if self.fmt is Format.VALUE:
            return "\n".join(" ".join(cell_text(item.get(c.key)) for c in chosen) for item in items)
        return dump([{c.title: item.get(c.key) for c in chosen} for item in items], self.fmt)

    def record(self, item: Mapping[str, Any], *, keys: Sequence[str] | None = None) -> str:
        chosen = [c.key for c in self._choose([Column(k, k) for k in (keys or list(item))])]
        if self.fmt is Format.TABLE:
            return table(["Field", "Value"], [[k, item.get(k)] for k in chosen])
        if self.fmt is Format.VALUE:
            return "\n".join(cell_text(item.get(k)) for k in chosen)
        return dump({k: item.get(k) for k in chosen}, self.fmt)

    def _choose(self, columns: Sequence[Column]) -> list[Column]:
        if not self.columns:
            return list(columns)
        by_name = {name.lower(): c for c in columns for name in (c.title, c.key)}
        missing = [w for w in self.columns if w.lower() not in by_name]
        if missing:
            known = ", ".join(c.key for c in columns)
            raise CliError(f"no column {', '.join(missing)}; choose from: {known}")
        return [by_name[w.lower()] for w in self.columns]


def dump(value: Any, fmt: Format) -> str:
    if fmt is Format.YAML:
        return yaml.safe_dump(value, sort_keys=False, default_flow_style=False).rstrip("\n")
    return json.dumps(value, indent=2)


def cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    return json.dumps(value, indent=2)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A boxed table; cells may span several lines."""
    cells = [[cell_text(v).splitlines() or [""] for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, lines in enumerate(row):
            widths[i] = max(widths[i], *(len(line) for line in lines))
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(parts: Sequence[str]) -> str:
        return "| " + " | ".join(p.ljust(w) for p, w in zip(parts, widths, strict=True)) + " |"

    out = [rule, line(headers), rule]
    for row in cells:
        height = max(len(lines) for lines in row)
        out += [line([lines[i] if i < len(lines) else "" for lines in row]) for i in range(height)]
    if rows:
        out.append(rule)
    return "\n".join(out)
