"""A template and its environments as python-heatclient sends them: with every file they name.

`openstack stack create -t main.yaml -e env.yaml` sends, beside the template
and the merged environment, each file they refer to in `files`, keyed by its
absolute `file:` URL, and rewrites each reference to that URL. The same here:

- in a template, and in every template it refers to: each `get_file` value,
  and each `type` ending in `.yaml` or `.template` (a template resource);
- in an environment's `resource_registry`: each entry that names a file (not
  a type, `A::B`), at the top and under `resources:` for one resource,
  relative to the registry's `base_url` when it has one, else to the
  environment file itself.

A file that is a template (a mapping with a template version key) is sent as
JSON, its own references resolved the same way; any other file as its text
(base64 when it is not UTF-8). Several environments merge in order, later
ones winning key by key (`inputs.deep_update`).

This is the behaviour of heatclient's `template_utils`, written small here
rather than imported: heatclient would make keystoneauth, openstacksdk,
osc-lib and some 40 other packages (60 MB) runtime dependencies of every
Converge service for these hundred lines. Only local files are read: an
http(s) reference is an error naming it. At most MAX_FILES files of
MAX_TOTAL_BYTES in all, nested at most MAX_DEPTH templates deep; a template
that refers back to one being read is not read again.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit
from urllib.request import url2pathname

import yaml

from services.cli.client import CliError
from services.cli.inputs import deep_update, parse_document, parse_yaml

MAX_FILES = 1000
MAX_TOTAL_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 20
TEMPLATE_SUFFIXES = (".yaml", ".template")
VERSION_KEYS = ("heat_template_version", "HeatTemplateFormatVersion", "AWSTemplateFormatVersion")
#: Registry keys that name no file.
REGISTRY_SKIP = ("base_url", "hooks", "restricted_actions")


@dataclass
class Uploads:
    """The `files` of one request, as they are gathered."""

    files: dict[str, str] = field(default_factory=dict)
    total_bytes: int = 0
    _reading: set[str] = field(default_factory=set)

    def template(self, path: str) -> dict[str, Any]:
        """The template at `path`, its references rewritten and their files gathered."""
        text = _text(_read_path(path, "template"), path, "template")
        document = parse_document(text, source=path, what="template")
        self._resolve_template(document, file_url(path), depth=0)
        return document

    def environments(self, paths: Sequence[str]) -> dict[str, Any]:
        """The environments at `paths`, merged in order, their registries' files gathered."""
        merged: dict[str, Any] = {}
        for path in paths:
            url = file_url(path)
            text = _text(_read_path(path, "environment"), path, "environment")
            env = parse_document(text, source=path, what="environment")
            registry = env.get("resource_registry")
            if isinstance(registry, dict):
                base = _directory(str(registry.get("base_url") or _parent(url)))
                self._resolve_registry(registry, base)
                resources = registry.get("resources")
                for entry in resources.values() if isinstance(resources, dict) else ():
                    if isinstance(entry, dict):
                        self._resolve_registry(entry, _directory(str(entry.get("base_url") or base)))
            merged = deep_update(merged, env)
        return merged

    def _resolve_template(self, document: dict[str, Any], url: str, *, depth: int) -> None:
        base = _parent(url)
        for mapping in _mappings(document):
            for key in ("get_file", "type"):
                value = mapping.get(key)
                if not isinstance(value, str):
                    continue
                if key == "type" and not value.endswith(TEMPLATE_SUFFIXES):
                    continue  # a resource type such as OS::Heat::None (or a parameter's `string`)
                mapping[key] = self._add(urljoin(base, value), depth=depth + 1)

    def _resolve_registry(self, registry: dict[str, Any], base: str) -> None:
        for key, value in registry.items():
            if key in REGISTRY_SKIP or not isinstance(value, str) or "::" in value:
                continue
            registry[key] = self._add(urljoin(base, value), depth=1)

    def _add(self, url: str, *, depth: int) -> str:
        """Gather the file at `url` (once); the URL the reference is rewritten to."""
        if url in self.files or url in self._reading:
            return url
        if depth > MAX_DEPTH:
            raise CliError(f"templates nest more than {MAX_DEPTH} deep at {url}")
        if len(self.files) >= MAX_FILES:
            raise CliError(f"more than {MAX_FILES} files to upload (at {url})")
        self._reading.add(url)
        raw = _read(url, "file")
        self.total_bytes += len(raw)
        if self.total_bytes > MAX_TOTAL_BYTES:
            raise CliError(f"the files to upload exceed {MAX_TOTAL_BYTES // (1024 * 1024)} MiB (at {url})")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            self.files[url] = base64.encodebytes(raw).decode("ascii")
        else:
            nested = _as_template(text)
            if nested is not None:
                self._resolve_template(nested, url, depth=depth)
                text = json.dumps(nested)
            self.files[url] = text
        self._reading.discard(url)
        return url


def file_url(path: str) -> str:
    """A path as an absolute `file:` URL (a URL stays as it is)."""
    if urlsplit(path).scheme:
        return path
    return Path(path).resolve().as_uri()


def _read(url: str, what: str) -> bytes:
    parts = urlsplit(url)
    if parts.scheme != "file":
        raise CliError(
            f"cannot read {what} {url}: converge uploads local files only "
            "(download it and refer to it by its path)"
        )
    return _read_path(url2pathname(parts.path), what)


def _read_path(path: str, what: str) -> bytes:
    if urlsplit(path).scheme:
        return _read(path, what)
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc


def _text(raw: bytes, path: str, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(f"cannot read {what} {path}: not UTF-8 text") from exc


def _as_template(text: str) -> dict[str, Any] | None:
    """The parsed template, when `text` is one (a mapping with a version key)."""
    try:
        document = parse_yaml(text)
    except yaml.YAMLError:
        return None
    if isinstance(document, dict) and any(key in document for key in VERSION_KEYS):
        return document
    return None


def _parent(url: str) -> str:
    return url[: url.rfind("/") + 1]


def _directory(url: str) -> str:
    return url if url.endswith("/") else url + "/"


def _mappings(document: Any) -> Iterator[dict[str, Any]]:
    """Every mapping in `document`, however deep (without recursion: YAML may nest deeply)."""
    pending = [document]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            yield item
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
