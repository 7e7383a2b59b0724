"""Pure implementations of the HOT string functions: joining, splitting, replacing.

Also digest, make_url and the old CFN string functions. Like `intrinsics`
(lists and maps), called by the compiler to fold known arguments and by
resolution for arguments known only at check time; each takes resolved
arguments, the version and the request's `Budget`, and raises
`FunctionArgError` with a message. Each charges the budget for the strings
it builds before building them (a join's length is summed first; str_replace
finds every placeholder before it assembles the result).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any
from urllib import parse as urlparse

from services.engine.template.errors import FunctionArgError
from services.engine.template.intrinsics import dumps, kind, require_list, require_map, require_str
from services.engine.template.limits import Budget
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


def _join(delim: str, items: list[Any], allow_json: bool, budget: Budget) -> str:
    parts: list[str] = []
    for item in items:
        part = _join_item(item, allow_json)
        if part is not item:  # a map or list serialised: a new string
            budget.charge(chars=len(part))
        parts.append(part)
    budget.charge(chars=sum(map(len, parts)) + len(delim) * max(len(parts) - 1, 0))
    return delim.join(parts)


def list_join(args: Any, version: TemplateVersion, budget: Budget) -> str:
    args = require_list(args, "arguments")
    multiple = version.list_join_multiple
    if len(args) < 2 or (not multiple and len(args) != 2):
        raise FunctionArgError("expected [<delimiter>, <list>" + (", ...]" if multiple else "]"))
    delim = require_str(args[0], "the delimiter")
    lists = [
        require_list(joined, "each joined value") for joined in args[1:] if joined
    ]  # Heat skips null, []
    budget.charge(items=sum(len(lst) for lst in lists))
    return _join(delim, [i for lst in lists for i in lst], multiple, budget)


def cfn_join(args: Any, version: TemplateVersion, budget: Budget) -> str:
    args = require_list(args, "arguments")
    if len(args) != 2:
        raise FunctionArgError("expected [<delimiter>, <list>]")
    delim = require_str(args[0], "the delimiter")
    items = [] if args[1] is None else require_list(args[1], "the joined value")
    return _join(delim, items, False, budget)


def _split(text: str, delim: str, budget: Budget) -> list[str]:
    budget.search(len(text))
    budget.charge(items=text.count(delim) + 1, chars=len(text))
    return text.split(delim)


def str_split(args: Any, version: TemplateVersion, budget: Budget) -> Any:
    args = require_list(args, "arguments")
    if not 2 <= len(args) <= 3:
        raise FunctionArgError("expected [<delimiter>, <string>] or [<delimiter>, <string>, <index>]")
    delim = require_str(args[0], "the delimiter")
    if not delim:
        raise FunctionArgError("the delimiter must not be empty")
    if args[1] is None:
        return None
    parts = _split(require_str(args[1], "the string to split"), delim, budget)
    if len(args) == 2:
        return parts
    return parts[_index(args[2], len(parts))]


def cfn_split(args: Any, version: TemplateVersion, budget: Budget) -> list[str]:
    args = require_list(args, "arguments")
    if len(args) != 2:
        raise FunctionArgError("expected [<delimiter>, <string>]")
    delim = require_str(args[0], "the delimiter")
    if not delim:
        raise FunctionArgError("the delimiter must not be empty")
    return _split(require_str(args[1], "the string to split"), delim, budget)


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


def cfn_select(args: Any, version: TemplateVersion, budget: Budget) -> Any:
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


def cfn_base64(args: Any, version: TemplateVersion, budget: Budget) -> str:
    # As in Heat: the value is passed through; consumers do the encoding.
    return require_str(args, "the argument")


# --- replacing -------------------------------------------------------------


@dataclass(frozen=True)
class _Strictness:
    strict: bool  # every param must occur in the template
    very_strict: bool  # ... and have a non-empty value


_LAX = _Strictness(strict=False, very_strict=False)
_STRICT = _Strictness(strict=True, very_strict=False)
_VERY_STRICT = _Strictness(strict=True, very_strict=True)


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


def replace(template: Any, params: Any, version: TemplateVersion, how: _Strictness, budget: Budget) -> str:
    """Heat's str_replace: placeholders longest first (then alphabetically), each
    replacing its leftmost non-overlapping occurrences in the text the ones before it
    left alone; a replaced value is never searched again.

    Heat splits the text by each placeholder in turn; this finds the same
    occurrences in one pass per placeholder over the original text, marking
    what earlier placeholders took, so its cost is linear in the text per
    placeholder (paid for as a search) plus the occurrences (items), and the
    result's length is known, and paid for, before it is built.
    """
    text = require_str(template, "the template")
    params = require_map(params, "params")
    json_values = version.str_replace_json
    values: dict[str, str] = {}
    for key, val in params.items():
        values[key] = _replacement(val, key, json_values, how.very_strict)
        if values[key] is not val:
            budget.charge(chars=len(values[key]))
    keys = sorted(sorted(values), key=len, reverse=True)
    size = len(text)
    taken = bytearray(size)  # 1 where an earlier placeholder's occurrence is
    found: list[tuple[int, str]] = []
    replaced: set[str] = {""}  # an empty placeholder replaces nothing, and is not missing
    for key in keys:
        width = len(key)
        if not width or width > size:
            continue
        budget.search(size)
        at = text.find(key)
        while at != -1:
            budget.charge(items=1)
            clash = taken.find(1, at, at + width)
            if clash == -1:
                taken[at : at + width] = b"\x01" * width
                found.append((at, key))
                replaced.add(key)
                at = text.find(key, at + width)
            else:  # no occurrence can start before the end of what was taken there
                after = taken.find(0, clash)
                at = -1 if after == -1 else text.find(key, after)
    if how.strict:
        missing = sorted(k for k in values if k not in replaced)
        if missing:
            raise FunctionArgError("params not found in the template: " + ", ".join(repr(k) for k in missing))
    if not found:
        return text
    found.sort()
    budget.charge(chars=size + sum(len(values[k]) - len(k) for _, k in found))
    pieces: list[str] = []
    done = 0
    for at, key in found:
        pieces.append(text[done:at])
        pieces.append(values[key])
        done = at + len(key)
    pieces.append(text[done:])
    return "".join(pieces)


def _replace_args(args: Any) -> dict[str, Any]:
    checked = require_map(args, "arguments")
    if set(checked) != {"template", "params"}:
        raise FunctionArgError("expected a map with exactly the keys 'template' and 'params'")
    return checked


def str_replace(args: Any, version: TemplateVersion, budget: Budget) -> str:
    args = _replace_args(args)
    return replace(args["template"], args["params"], version, _LAX, budget)


def str_replace_strict(args: Any, version: TemplateVersion, budget: Budget) -> str:
    args = _replace_args(args)
    return replace(args["template"], args["params"], version, _STRICT, budget)


def str_replace_vstrict(args: Any, version: TemplateVersion, budget: Budget) -> str:
    args = _replace_args(args)
    return replace(args["template"], args["params"], version, _VERY_STRICT, budget)


def cfn_replace(args: Any, version: TemplateVersion, budget: Budget) -> str:
    args = require_list(args, "arguments")
    if len(args) != 2:
        raise FunctionArgError("expected [{<placeholder>: <value>, ...}, <template string>]")
    return replace(args[1], args[0], version, _LAX, budget)


# --- hashing and URLs --------------------------------------------------------


def digest(args: Any, version: TemplateVersion, budget: Budget) -> str:
    args = require_list(args, "arguments")
    if len(args) != 2:
        raise FunctionArgError("expected [<algorithm>, <value>]")
    algorithm = require_str(args[0], "the algorithm").lower()
    if algorithm not in _DIGEST_ALGORITHMS:
        raise FunctionArgError(f"unknown algorithm {algorithm!r} (one of: {', '.join(_DIGEST_ALGORITHMS)})")
    value = require_str(args[1], "the value")
    return hashlib.new(algorithm, value.encode("utf-8")).hexdigest()


def make_url(args: Any, version: TemplateVersion, budget: Budget) -> str:
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
    budget.charge(items=len(query))
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
