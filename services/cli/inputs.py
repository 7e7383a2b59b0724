"""Reading what the user hands the client: template and environment documents, `k=v` parameters.

Documents are parsed here (YAML, of which JSON is a subset) and sent to the
API as objects. As in Heat, dates stay strings (`heat_template_version:
2016-10-14` is a version, not a date). A document that cannot be parsed is a
one-line error naming the file, line and column. The files a template or an
environment refers to are gathered by `uploads`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from services.cli.client import CliError


class _HeatLoader(yaml.SafeLoader):
    """Safe YAML, but timestamps load as the text they are written as."""


_HeatLoader.add_constructor(
    "tag:yaml.org,2002:timestamp",
    lambda loader, node: loader.construct_scalar(node),  # type: ignore[arg-type]
)


def load_document(path: str, *, what: str) -> dict[str, Any]:
    """Parse a template or environment file; a CliError naming the file if it can't be."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise CliError(f"cannot read {what} {path}: not UTF-8 text") from exc
    return parse_document(text, source=path, what=what)


def parse_document(text: str, *, source: str, what: str) -> dict[str, Any]:
    """A YAML or JSON mapping (empty text: {}); a CliError naming `source` and where it is wrong."""
    try:
        document = parse_yaml(text)
    except yaml.YAMLError as exc:
        raise CliError(f"{what} {source} is not valid YAML or JSON: {_where(exc)}") from exc
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise CliError(f"{what} {source} must be a mapping, not {type(document).__name__}")
    return document


def parse_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_HeatLoader)  # a SafeLoader subclass


def parse_parameters(pairs: Iterable[str]) -> dict[str, str]:
    """`--parameter key=value`, repeated; the value may itself contain `=`."""
    parameters: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"--parameter expects KEY=VALUE, got {pair!r}")
        parameters[key] = value
    return parameters


def deep_update(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """`override` merged into `base` key by key, mappings merged all the way down. As
    with heatclient, an empty value (`key:` with nothing after it) does not wipe a mapping."""
    result = dict(base)
    for key, value in override.items():
        current = result.get(key)
        if isinstance(value, Mapping):
            result[key] = deep_update(current if isinstance(current, Mapping) else {}, value)
        elif value is None and isinstance(current, Mapping):
            continue
        else:
            result[key] = value
    return result


def _where(exc: yaml.YAMLError) -> str:
    """`line L, column C: what is wrong` (1-based), or the error flattened onto one line."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        problem = " ".join(filter(None, (exc.context, exc.problem)))
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return " ".join(str(exc).split())[:300]
