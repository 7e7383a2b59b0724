"""Keystone mode's decisions, free of I/O: what a validated token means, and how long
to believe it.

Where it sits: `keystone.py` (the gateway to Keystone) reads Keystone's answer to
"validate this token" into `TokenFacts` (`facts_from_answer`), keeps them in a
`TokenCache`, and turns them into the `Principal` the auth middleware needs
(`principal_for`) on every request. Roles are read as Heat's default policy
reads them: `admin`, `member`, `reader`, case-insensitively; Keystone's
implied roles (admin implies member implies reader) are already in the token.
The cache holds tokens by their SHA-256 digest only: a token itself is never
kept, and never logged.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from services.engine.api.auth import Principal
from shared.errors import Forbidden, TransientError

ADMIN, MEMBER, READER = "admin", "member", "reader"
#: How long Keystone's "not a valid token" is remembered (seconds), so a client that keeps
#: sending the same bad token does not make a Keystone call each time. Short: nothing is lost.
INVALID_SECONDS = 10.0
#: Invalid answers have their own, smaller room, so a flood of made-up tokens never pushes
#: the valid ones out of the cache.
MAX_INVALID_ENTRIES = 1024

V = TypeVar("V")


@dataclass(frozen=True)
class TokenFacts:
    """What Keystone said about a valid token."""

    user_id: str
    project_id: str | None  # None: not scoped to a project (unscoped, domain or system scope)
    roles: frozenset[str]  # lower-cased role names, implied roles included
    expires_at: float  # seconds since the epoch
    admin_project: bool  # Keystone's is_admin_project; absent = True, as Keystone means it


class _Ref(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str = ""
    name: str = ""


class _Token(BaseModel):
    model_config = ConfigDict(extra="ignore")
    expires_at: datetime
    user: _Ref
    project: _Ref | None = None
    roles: list[_Ref] = []
    is_admin_project: bool = True


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")
    token: _Token


def facts_from_answer(answer: object) -> TokenFacts:
    """Keystone's `GET /v3/auth/tokens` body as `TokenFacts`; a body that is not one is
    Keystone misbehaving (`TransientError`: the request is answered 503)."""
    try:
        token = _Answer.model_validate(answer).token
    except ValidationError as exc:
        raise TransientError(f"Keystone's token validation answer could not be read: {exc}") from exc
    return TokenFacts(
        user_id=token.user.id,
        project_id=token.project.id if token.project is not None and token.project.id else None,
        roles=frozenset(r.name.lower() for r in token.roles if r.name),
        expires_at=token.expires_at.timestamp(),
        admin_project=token.is_admin_project,
    )


def principal_for(facts: TokenFacts) -> Principal:
    """The `Principal` a valid token speaks for, or `Forbidden` saying why it grants nothing.

    `admin` may use every project's URL, as in Heat — unless Keystone marks the token's
    project as not the admin project (`is_admin_project` false, when an operator configured
    one), where it is a member of its own project only. `member` may do everything in its
    project; `reader` may only read there; a token with none of the three gets nothing."""
    project = facts.project_id
    if project is None:
        raise Forbidden(
            "The token is not scoped to a project: Converge needs a project-scoped token "
            "(e.g. set OS_PROJECT_NAME or OS_PROJECT_ID)"
        )
    if ADMIN in facts.roles:
        return Principal(project, admin=facts.admin_project)
    if MEMBER in facts.roles:
        return Principal(project)
    if READER in facts.roles:
        return Principal(project, read_only=True)
    held = ", ".join(sorted(facts.roles))[:200] or "none"
    raise Forbidden(
        f"The token's roles in project {project} ({held}) give no access to orchestration: "
        f"one of {ADMIN}, {MEMBER} or {READER} is needed"
    )


def token_key(token: str) -> bytes:
    """What the cache keeps of a token: its SHA-256 digest."""
    return hashlib.sha256(token.encode()).digest()


@dataclass(frozen=True)
class Known:
    """A cached answer: the token's facts, or None when Keystone said it is not valid."""

    facts: TokenFacts | None


class TokenCache:
    """Keystone's answers for a while: a valid token's facts for `ttl` seconds but never past
    the token's expiry, an invalid token's for `INVALID_SECONDS`; at most `size` valid
    entries (and `MAX_INVALID_ENTRIES` invalid ones), the least recently used going first.
    `clock` gives seconds since the epoch (tokens expire on the wall clock)."""

    def __init__(self, *, ttl: float, size: int, clock: Callable[[], float]) -> None:
        self._ttl, self._size, self._clock = ttl, size, clock
        self._valid: OrderedDict[bytes, tuple[float, TokenFacts]] = OrderedDict()
        self._invalid: OrderedDict[bytes, float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._valid) + len(self._invalid)

    def lookup(self, token: str) -> Known | None:
        """The remembered answer for `token`, or None when there is none (or it expired)."""
        key, now = token_key(token), self._clock()
        if (entry := self._valid.get(key)) is not None:
            until, facts = entry
            if now < until:
                self._valid.move_to_end(key)
                return Known(facts)
            del self._valid[key]
        if (until_invalid := self._invalid.get(key)) is not None:
            if now < until_invalid:
                return Known(None)
            del self._invalid[key]
        return None

    def remember(self, token: str, facts: TokenFacts | None) -> None:
        key, now = token_key(token), self._clock()
        if facts is None:
            until = now + min(self._ttl, INVALID_SECONDS)
            if until > now:
                self._invalid[key] = until
                self._invalid.move_to_end(key)
                _trim(self._invalid, min(self._size, MAX_INVALID_ENTRIES))
            return
        until = min(now + self._ttl, facts.expires_at)
        if until > now:  # nothing to remember with a zero ttl, or for a token already expired
            self._invalid.pop(key, None)
            self._valid[key] = (until, facts)
            self._valid.move_to_end(key)
            _trim(self._valid, self._size)


def _trim(entries: OrderedDict[bytes, V], size: int) -> None:
    while len(entries) > size:
        entries.popitem(last=False)
