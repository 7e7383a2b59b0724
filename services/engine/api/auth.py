"""Authentication and tenant isolation for `/v1/{project_id}/...`.

Every `/v1` request carries `X-Auth-Token`; tokens come from
CONVERGE_API_TOKENS (`token=project_id` or `token=project_id:admin`,
comma-separated). Tokens are compared in constant time and never logged.
A token for one project asking about another project's URL gets 404, as if
nothing were there; admins may use any project's URL (and see only that
project's stacks there). The one exception is a resource signal, which a
wait-condition handle's own token may authorise: a POST to
`.../stacks/{name}/{id}/resources/{name}/signal` whose token is shaped like a
handle's (`HANDLE_TOKEN`) goes on to the signal handler, which checks it and
answers every failure with this same 401; every other request without a
project token is refused here, before anything is looked up.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Middleware

from shared.errors import ConfigError

#: The one answer to a request without a valid token, whatever it asked about.
AUTH_REQUIRED = "Authentication required: a valid X-Auth-Token header"
#: A wait-condition handle's token (shared/plugins/builtin/wait_condition.py): 48 lowercase hex.
HANDLE_TOKEN = re.compile(r"[0-9a-f]{48}")


def may_be_handle_signal(method: str, parts: list[str], token: str) -> bool:
    """Whether an unauthenticated request could be a handle signalling itself:
    POST /v1/{project}/stacks/{name}/{id}/resources/{resource}/signal with a handle-shaped token."""
    return (
        method == "POST"
        and len(parts) == 9
        and parts[3] == "stacks"
        and parts[6] == "resources"
        and parts[8] == "signal"
        and HANDLE_TOKEN.fullmatch(token) is not None
    )


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
        if len(parts) < 3 or parts[1] != "v1" or request.path == "/v1/":  # /v1/: the version document
            return await handler(request)
        token = request.headers.get("X-Auth-Token", "")
        principal = tokens.lookup(token)
        if principal is None:
            if may_be_handle_signal(request.method, parts, token):
                return await handler(request)  # a handle's own token may signal it (checked there)
            raise unauthorized(AUTH_REQUIRED)
        if parts[2] != principal.project_id and not principal.admin:
            raise not_found("The resource could not be found.")
        request[PRINCIPAL] = principal
        return await handler(request)

    return middleware
