"""Reading what the user hands the client: template and environment files, `k=v` parameters.

Files are parsed here (YAML, of which JSON is a subset) and sent to the API as
objects. As in Heat, dates stay strings (`heat_template_version: 2016-10-14`
is a version, not a date), and several environments merge in order, later
ones winning key by key. `get_file` references are not resolved.
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
    try:
        document = yaml.load(text, Loader=_HeatLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise CliError(f"{what} {path} is not valid YAML or JSON: {_first_line(exc)}") from exc
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise CliError(f"{what} {path} must be a mapping, not {type(document).__name__}")
    return document


def merged_environment(paths: Iterable[str]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for path in paths:
        merged = _deep_merge(merged, load_document(path, what="environment"))
    return merged


def parse_parameters(pairs: Iterable[str]) -> dict[str, str]:
    """`--parameter key=value`, repeated; the value may itself contain `=`."""
    parameters: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"--parameter expects KEY=VALUE, got {pair!r}")
        parameters[key] = value
    return parameters


def _deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    result = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
            result[key] = _deep_merge(result[key], value)
        else:
            result[key] = value
    return result


def _first_line(exc: yaml.YAMLError) -> str:
    return " ".join(str(exc).split())[:300]
