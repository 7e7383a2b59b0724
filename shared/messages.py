"""Message models: the wire contract between services.

Every message is a pydantic model with a unique `id`, a `kind` and a schema
`version`, sent as JSON. A `Codec` knows the kinds one consumer accepts; a
body it cannot decode (malformed JSON, unknown kind, wrong fields) raises
`MessageRejected`, which the bus turns into a dead letter with the reason.
Delivery is at-least-once: handlers are idempotent, keyed on `id`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from shared.errors import MessageRejected


def new_message_id() -> str:
    return uuid.uuid4().hex


class Message(BaseModel):
    """Base of every message. Subclasses set `kind` (and bump `version` on
    an incompatible change)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: ClassVar[str]
    version: ClassVar[int] = 1

    id: str = Field(default_factory=new_message_id, min_length=1, max_length=64)

    def text(self) -> str:
        """The message as the JSON its queue carries: its fields, then `kind` and `version`."""
        fields = self.model_dump_json()  # compact, and never empty: every message has an id
        return f'{fields[:-1]},"kind":{json.dumps(self.kind)},"version":{self.version}}}'

    def encode(self) -> bytes:
        return self.text().encode()


class Codec:
    """Decodes bodies into the message kinds one consumer accepts."""

    def __init__(self, kinds: Iterable[type[Message]]) -> None:
        self._kinds: dict[tuple[str, int], type[Message]] = {}
        for cls in kinds:
            key = (cls.kind, cls.version)
            if key in self._kinds:
                raise ValueError(f"message kind {cls.kind!r} v{cls.version} registered twice")
            self._kinds[key] = cls

    def decode(self, body: bytes) -> Message:
        try:
            data: Any = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise MessageRejected(f"malformed body: {exc}") from exc
        if not isinstance(data, dict):
            raise MessageRejected("malformed body: not a JSON object")
        kind, version = data.pop("kind", None), data.pop("version", None)
        cls = self._kinds.get((kind, version)) if isinstance(kind, str) else None
        if cls is None:
            raise MessageRejected(f"unknown message kind {kind!r} version {version!r}")
        try:
            return cls.model_validate(data)
        except PydanticValidationError as exc:
            raise MessageRejected(f"invalid {kind} message: {_first_error(exc)}") from exc


def _first_error(exc: PydanticValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(part) for part in err["loc"]) or "body"
    return f"{where}: {err['msg']}"
