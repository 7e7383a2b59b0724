"""Authentication and tenant isolation for `/v1/{project_id}/...`.

Every `/v1` request carries `X-Auth-Token`; tokens come from
CONVERGE_API_TOKENS (`token=project_id` or `token=project_id:admin`,
comma-separated). Tokens are compared in constant time and never logged.
A token for one project asking about another project's URL gets 404, as if
nothing were there; admins may act on any project. The one exception is a
resource signal, which a wait-condition handle's own token may authorise
(the signal handler checks it; an unauthenticated caller learns nothing).
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Middleware

from shared.errors import ConfigError


@dataclass(frozen=True)
class Principal:
    project_id: str
    admin: bool = False


PRINCIPAL = web.RequestKey("principal", Principal)


class Tokens:
    def __init__(self, entries: dict[str, Principal]) -> None:
        self._entries = [(token.encode(), principal) for token, principal in entries.items()]

    @classmethod
    def parse(cls, text: str | None) -> Tokens:
        entries: dict[str, Principal] = {}
        for raw in (text or "").split(","):
            entry = raw.strip()
            if not entry:
                continue
            token, sep, scope = entry.partition("=")
            project, _, role = scope.partition(":")
            if not sep or not token or not project or role not in ("", "admin"):
                raise ConfigError(
                    "CONVERGE_API_TOKENS: each entry must be token=project_id or token=project_id:admin"
                )
            entries[token] = Principal(project, admin=role == "admin")
        return cls(entries)

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, token: str) -> Principal | None:
        """Constant-time: every entry is compared, whatever matches."""
        given = token.encode()
        found: Principal | None = None
        for known, principal in self._entries:
            if hmac.compare_digest(known, given):
                found = principal
        return found


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def auth_middleware(
    tokens: Tokens,
    *,
    not_found: Callable[[str], web.HTTPException],
    unauthorized: Callable[[str], web.HTTPException],
) -> Middleware:
    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        parts = request.path.split("/")
        if len(parts) < 3 or parts[1] != "v1":
            return await handler(request)
        principal = tokens.lookup(request.headers.get("X-Auth-Token", ""))
        if principal is None:
            if request.method == "POST" and parts[-1] == "signal":
                return await handler(request)  # a handle's own token may signal it (checked there)
            raise unauthorized("Authentication required: a valid X-Auth-Token header")
        if parts[2] != principal.project_id and not principal.admin:
            raise not_found("The resource could not be found.")
        request[PRINCIPAL] = principal
        return await handler(request)

    return middleware
