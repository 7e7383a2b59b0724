"""Pure implementations of the HOT string functions: joining, splitting, replacing.

Also digest, make_url and the old CFN string functions. Like `intrinsics`
(lists and maps), called by the compiler to fold known arguments and by
resolution for arguments known only at check time; each takes resolved
arguments and raises `FunctionArgError` with a message.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any
from urllib import parse as urlparse

from services.engine.template.errors import FunctionArgError
from services.engine.template.intrinsics import Impl, dumps, kind, require_list, require_map, require_str
from services.engine.template.versions import TemplateVersion

_DIGEST_ALGORITHMS = ("md5", "sha1", "sha224", "sha256", "sha384", "sha512")
_URL_KEYS = ("scheme", "username", "password", "host", "port", "path", "query", "fragment")


# --- joining and splitting -------------------------------------------------


def _join_item(item: Any, allow_json: bool) -> str:
    if item is None:
        return ""
    if isinstance(item, str):
        return item
    if allow_json and isinstance(item, dict | list):
        return dumps(item)
    allowed = "strings, maps or lists" if allow_json else "strings"
    raise FunctionArgError(f"items to join must be {allowed}, not {kind(item)}: {item!r:.100}")


def list_join(args: Any, version: TemplateVersion) -> str:
    args = require_list(args, "arguments")
    multiple = version.list_join_multiple
    if len(args) < 2 or (not multiple and len(args) != 2):
        raise FunctionArgError("expected [<delimiter>, <list>" + (", ...]" if multiple else "]"))
    delim = require_str(args[0], "the delimiter")
    items: list[Any] = []
    for joined in args[1:]:
        if not joined:  # Heat skips null and empty lists
            continue
        items.extend(require_list(joined, "each joined value"))
    return delim.join(_join_item(i, multiple) for i in items)


def cfn_join(args: Any, version: TemplateVersion) -> str:
    args = require_list(args, "arguments")
    if len(args) != 2:
        raise FunctionArgError("expected [<delimiter>, <list>]")
    delim = require_str(args[0], "the delimiter")
    items = [] if args[1] is None else require_list(args[1], "the joined value")
    return delim.join(_join_item(i, False) for i in items)


def str_split(args: Any, version: TemplateVersion) -> Any:
    args = require_list(args, "arguments")
    if not 2 <= len(args) <= 3:
        raise FunctionArgError("expected [<delimiter>, <string>] or [<delimiter>, <string>, <index>]")
    delim = require_str(args[0], "the delimiter")
    if not delim:
        raise FunctionArgError("the delimiter must not be empty")
    if args[1] is None:
        return None
    parts = require_str(args[1], "the string to split").split(delim)
    if len(args) == 2:
        return parts
    return parts[_index(args[2], len(parts))]


def cfn_split(args: Any, version: TemplateVersion) -> list[str]:
    args = require_list(args, "arguments")
    if len(args) != 2:
        raise FunctionArgError("expected [<delimiter>, <string>]")
    delim = require_str(args[0], "the delimiter")
    if not delim:
        raise FunctionArgError("the delimiter must not be empty")
    return require_str(args[1], "the string to split").split(delim)


def _index(value: Any, length: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise FunctionArgError(f"the index must be an integer, not {kind(value)}")
    try:
        index = int(value)
    except ValueError as exc:
        raise FunctionArgError(f"the index must be an integer, not {value!r}") from exc
    if not -length <= index < length:
        raise FunctionArgError(f"index {index} is out of range (0 to {length - 1})")
    return index


def cfn_select(args: Any, version: TemplateVersion) -> Any:
    args = require_list(args, "arguments")
    if len(args) != 2:
        raise FunctionArgError("expected [<index>, <list or map>]")
    index, collection = args
    if collection is None:
        return ""
    if isinstance(collection, dict):
        return collection.get(require_str(index, "a map key"), "")
    if isinstance(collection, str):  # CFN: a comma-delimited string is a list
        collection = collection.split(",")
    collection = require_list(collection, "the collection")
    if isinstance(index, bool) or not isinstance(index, int | str):
        raise FunctionArgError(f"the index must be an integer, not {kind(index)}")
    try:
        position = int(index)
    except ValueError as exc:
        raise FunctionArgError(f"the index must be an integer, not {index!r}") from exc
    return collection[position] if 0 <= position < len(collection) else ""


def cfn_base64(args: Any, version: TemplateVersion) -> str:
    # As in Heat: the value is passed through; consumers do the encoding.
    return require_str(args, "the argument")


# --- replacing -------------------------------------------------------------


@dataclass(frozen=True)
class _Strictness:
    strict: bool  # every param must occur in the template
    very_strict: bool  # ... and have a non-empty value


def _replacement(value: Any, param: str, json_values: bool, very_strict: bool) -> str:
    if very_strict and (value is None or value == "" or value == [] or value == {}):
        raise FunctionArgError(f"param {param!r} has an empty or undefined value")
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return str(value)
    if json_values and isinstance(value, dict | list):
        return dumps(value)
    raise FunctionArgError(f"param {param!r} must be a string or number, not {kind(value)}")


def replace(template: Any, params: Any, version: TemplateVersion, how: _Strictness) -> str:
    template = require_str(template, "the template")
    params = require_map(params, "params")
    if how.strict:
        missing = sorted(k for k in params if k not in template)
        if missing:
            raise FunctionArgError("params not found in the template: " + ", ".join(repr(k) for k in missing))
    json_values = version.str_replace_json
    values = {key: _replacement(val, key, json_values, how.very_strict) for key, val in params.items()}
    # Longest placeholder first, and a replaced value is never searched again.
    keys = sorted(sorted(values), key=len, reverse=True)

    def substitute(text: str, remaining: list[str]) -> str:
        if not remaining or not text:
            return text
        key, rest = remaining[0], remaining[1:]
        if not key:
            return substitute(text, rest)
        return values[key].join(substitute(piece, rest) for piece in text.split(key))

    return substitute(template, keys)


def _str_replace(how: _Strictness) -> Impl:
    def impl(args: Any, version: TemplateVersion) -> str:
        args = require_map(args, "arguments")
        if set(args) != {"template", "params"}:
            raise FunctionArgError("expected a map with exactly the keys 'template' and 'params'")
        return replace(args["template"], args["params"], version, how)

    return impl


str_replace = _str_replace(_Strictness(strict=False, very_strict=False))
str_replace_strict = _str_replace(_Strictness(strict=True, very_strict=False))
str_replace_vstrict = _str_replace(_Strictness(strict=True, very_strict=True))


def cfn_replace(args: Any, version: TemplateVersion) -> str:
    args = require_list(args, "arguments")
    if len(args) != 2:
        raise FunctionArgError("expected [{<placeholder>: <value>, ...}, <template string>]")
    return replace(args[1], args[0], version, _Strictness(strict=False, very_strict=False))


# --- hashing and URLs --------------------------------------------------------


def digest(args: Any, version: TemplateVersion) -> str:
    args = require_list(args, "arguments")
    if len(args) != 2:
        raise FunctionArgError("expected [<algorithm>, <value>]")
    algorithm = require_str(args[0], "the algorithm").lower()
    if algorithm not in _DIGEST_ALGORITHMS:
        raise FunctionArgError(f"unknown algorithm {algorithm!r} (one of: {', '.join(_DIGEST_ALGORITHMS)})")
    value = require_str(args[1], "the value")
    return hashlib.new(algorithm, value.encode("utf-8")).hexdigest()


def make_url(args: Any, version: TemplateVersion) -> str:
    args = require_map(args, "arguments")
    unknown = sorted(set(args) - set(_URL_KEYS))
    if unknown:
        raise FunctionArgError(f"unknown key(s) {', '.join(unknown)} (allowed: {', '.join(_URL_KEYS)})")
    parts = {k: args.get(k) for k in _URL_KEYS}
    for key in ("scheme", "username", "password", "host", "path", "fragment"):
        if parts[key] is None:
            parts[key] = ""
        require_str(parts[key], key)
    scheme: str = parts["scheme"]
    if ":" in scheme:
        raise FunctionArgError("scheme must not contain ':'")
    netloc = ""
    username = urlparse.quote(parts["username"], safe="")
    password = urlparse.quote(parts["password"], safe="")
    if username or password:
        netloc = username + (f":{password}" if password else "") + "@"
    host: str = parts["host"]
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    host = urlparse.quote(host, safe=":")
    netloc += f"[{host}]" if ":" in host else host
    port = parts["port"]
    if port not in (None, ""):
        netloc += f":{_port(port)}"
    query = parts["query"] or {}
    query = require_map(query, "query")
    query_text = urlparse.urlencode(query).replace("%2F", "/")
    return urlparse.urlunsplit(
        (scheme, netloc, urlparse.quote(parts["path"]), query_text, urlparse.quote(parts["fragment"]))
    )


def _port(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise FunctionArgError(f"port must be an integer, not {kind(value)}")
    try:
        port = int(value)
    except ValueError as exc:
        raise FunctionArgError(f"invalid port {value!r}") from exc
    if not 1 <= port <= 65535:
        raise FunctionArgError(f"invalid port {port} (1 to 65535)")
    return port
