"""Authentication, roles and tenant isolation for `/v1/{project_id}/...`.

Every `/v1` request carries `X-Auth-Token`. Static tokens come from
CONVERGE_API_TOKENS (`token=project_id`, `token=project_id:admin` or
`token=project_id:reader`, comma-separated); they are compared in constant
time and never logged. In Keystone mode (CONVERGE_KEYSTONE_URL) every other
token is asked of an `Authenticator` (services/engine/api/keystone.py), which
maps a Keystone token to a `Principal` the same way: its project, and whether
it is an admin or may only read.

A token for one project asking about another project's URL gets 404, as if
nothing were there; admins may use any project's URL (and see only that
project's stacks there). A read-only principal (the `reader` role) gets 403,
in Heat's error shape, on every request that could change something
(`reader_may`). The one exception to authentication is a resource signal,
which a wait-condition handle's own token may authorise: a POST to
`.../stacks/{name}/{id}/resources/{name}/signal` whose token is shaped like a
handle's (`HANDLE_TOKEN`) goes on to the signal handler, which checks it and
answers every failure with this same 401 (such a token is never sent to
Keystone). A server's agent token is let through the same way for its
deployment metadata and outcome (`may_be_agent_request`), and a PUT to a
software deployment's signal URL needs no header at all: the token is in the
URL (`may_be_signal_url`, TEMP_URL_SIGNAL), checked by its handler. Every
other request without a valid token is refused here, before anything is
looked up.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from aiohttp import web
from aiohttp.typedefs import Middleware

from shared.errors import ConfigError, Forbidden

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


def may_be_agent_request(method: str, parts: list[str], token: str) -> bool:
    """Whether an unauthenticated request could be a server's agent with its own token
    (a Sandbox::Server's `agent_token`, handle-shaped): GET
    /v1/{project}/software_deployments/metadata/{server} or PUT
    /v1/{project}/software_deployments/{id} (checked by the handler)."""
    if HANDLE_TOKEN.fullmatch(token) is None or len(parts) < 5 or parts[3] != "software_deployments":
        return False
    if method == "GET":
        return len(parts) == 6 and parts[4] == "metadata"
    return method == "PUT" and len(parts) == 5


#: The token in a software deployment's signal URL (`deployment_urls.new_token`).
SIGNAL_URL_TOKEN = re.compile(r"[A-Za-z0-9_-]{43}")


def may_be_signal_url(method: str, parts: list[str]) -> bool:
    """Whether an unauthenticated request could be a PUT to a deployment's signal URL,
    /v1/{project}/software_deployments/{id}/signal/{token} (TEMP_URL_SIGNAL: the token in
    the URL authorises it; checked by the handler)."""
    return (
        method == "PUT"
        and len(parts) == 7
        and parts[3] == "software_deployments"
        and parts[5] == "signal"
        and SIGNAL_URL_TOKEN.fullmatch(parts[6]) is not None
    )


#: Methods that never change anything.
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def reader_may(method: str, parts: Sequence[str]) -> bool:
    """Whether a read-only principal may make this `/v1/{project}/...` request (`parts`: the
    path split on "/"): any read, and the three requests that only look at a template —
    preview a create, preview an update, validate. Everything else (create, update, delete,
    abandon, every action, signal, mark unhealthy, and any route added later) needs a
    member. Heat's default policy is the reference; where it differs, see README "Keystone"."""
    if method in READ_METHODS:
        return True
    tail = list(parts[3:])
    if method == "POST":
        return tail in (["stacks", "preview"], ["validate"])
    if method == "PUT":  # stacks/{name}/{id}/preview, or stacks/{name or id}/preview (redirected)
        return len(tail) in (3, 4) and tail[0] == "stacks" and tail[-1] == "preview"
    return False


def read_only_refusal(method: str, parts: Sequence[str]) -> str:
    """The 403 message for a read-only principal's request that could change something."""
    where = "/".join(parts[3:])[:200]
    return f"The reader role may only read: {method} {where} needs the member or admin role"


@dataclass(frozen=True)
class Principal:
    """Who a valid token speaks for: a project; `admin` may use any project's URL; `read_only`
    (Keystone's reader role) may only read."""

    project_id: str
    admin: bool = False
    read_only: bool = False


class Authenticator(Protocol):
    """Validates a token no static entry knows (Keystone mode): its `Principal`, or None when
    the token is not valid. Raises `Forbidden` for a valid token that grants nothing here, and
    `TransientError` when it cannot tell now (the request is answered 503)."""

    async def authenticate(self, token: str) -> Principal | None: ...


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
            if not sep or not token or not project or role not in ("", "admin", "reader"):
                raise ConfigError(
                    "CONVERGE_API_TOKENS: each entry must be token=project_id or "
                    "token=project_id:admin or token=project_id:reader"
                )
            entries[token] = Principal(project, admin=role == "admin", read_only=role == "reader")
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
    keystone: Authenticator | None = None,
) -> Middleware:
    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        parts = request.path.split("/")
        if len(parts) < 3 or parts[1] != "v1" or request.path == "/v1/":  # /v1/: the version document
            return await handler(request)
        token = request.headers.get("X-Auth-Token", "")
        principal = tokens.lookup(token)
        if principal is None:
            if may_be_signal_url(request.method, parts):
                return await handler(request)  # the token in the URL authorises it (checked there)
            if may_be_handle_signal(request.method, parts, token):
                return await handler(request)  # a handle's own token may signal it (checked there)
            if may_be_agent_request(request.method, parts, token):
                return await handler(request)  # a server's agent token (checked there)
            if keystone is not None and token:
                principal = await keystone.authenticate(token)
            if principal is None:
                raise unauthorized(AUTH_REQUIRED)
        if parts[2] != principal.project_id and not principal.admin:
            raise not_found("The resource could not be found.")
        if principal.read_only and not reader_may(request.method, parts):
            raise Forbidden(read_only_refusal(request.method, parts))
        request[PRINCIPAL] = principal
        return await handler(request)

    return middleware
