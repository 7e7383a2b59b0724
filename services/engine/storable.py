"""What PostgreSQL text and jsonb columns can hold: checked before anything is stored.

Pure. Used at the API boundary on every JSON body (`api.requests.read_json`)
and on every parsed goal document (`goals`, in the template pool), since YAML
text may hold "\0" escapes or .inf / .nan that JSON bodies cannot: either
would otherwise fail later in the store as a 500.
"""

from __future__ import annotations

import json
import math
from typing import Any

from shared.errors import InvalidInput


def storable_text(text: str) -> bool:
    """Whether PostgreSQL can store (or compare with) `text`."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # an unpaired surrogate, e.g. from the JSON "\ud800"
        return False
    return True


def check_storable(value: Any, where: str) -> None:
    """Refuse (InvalidInput naming the place) what text and jsonb columns cannot hold."""
    if _plainly_storable(value):
        return
    pending: list[tuple[Any, str]] = [(value, where)]
    while pending:  # iterative: parsed JSON may be nested as deep as the parser allowed
        item, path = pending.pop()
        if isinstance(item, str) and not storable_text(item):
            raise InvalidInput("NUL characters and unpaired surrogates are not allowed", path=path)
        if isinstance(item, float) and not math.isfinite(item):
            raise InvalidInput("numbers must be finite (no NaN or Infinity)", path=path)
        if isinstance(item, dict):
            for key, child in item.items():
                pending.append((key, path))
                named = f"{path}.{key}" if path else str(key)
                pending.append((child, named if storable_text(str(key)) else path))
        elif isinstance(item, list):
            pending.extend((child, f"{path}[{i}]") for i, child in enumerate(item))


def storable_json(value: Any, where: str) -> str:
    """`value` as compact JSON text (as its jsonb column is written), refused as
    `check_storable` refuses: for a large document, the one encoding that checks it
    is also the text stored (`goals.EncodedGoal`)."""
    text = _compact(value)
    if text is None or not _plain(text):
        check_storable(value, where)  # names the place; or it only looked unstorable
    return text if text is not None else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _plainly_storable(value: Any) -> bool:
    """Whether `value` is storable, told at C speed for the usual document: JSON text
    with no NaN or Infinity, no NUL (escaped `\\u0000`) and valid UTF-8. False when
    that cannot tell (also for a value that only looks like a NUL, or is not JSON):
    `check_storable` then walks the value, and names where it is wrong."""
    text = _compact(value)
    return text is not None and _plain(text)


def _compact(value: Any) -> str | None:
    """`value` as compact JSON text; None if it is not JSON or holds NaN or Infinity."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return None


def _plain(text: str) -> bool:
    """Whether JSON `text` is valid UTF-8 with no escaped NUL."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\\u0000" not in text
