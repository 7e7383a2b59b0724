"""Keystone mode: the engine's one gateway to Keystone, which validates users' tokens.

Where it sits: built in the engine's `main` (and `converge up`) when
CONVERGE_KEYSTONE_URL is set, and handed to the auth middleware
(services/engine/api/auth.py), which asks it about every token no static entry
knows. It speaks Keystone's v3 API directly with aiohttp, as Converge's own
service user: it logs in (`POST /v3/auth/tokens`, password or application
credential) and asks `GET /v3/auth/tokens?nocatalog` with the user's token as
`X-Subject-Token`. keystonemiddleware does the same, but as WSGI (paste)
middleware with synchronous HTTP; on an aiohttp engine it would need a thread
per validation and its own configuration files, for two calls.

Answers are cached (keystone_tokens.TokenCache: bounded, by the token's digest,
never past its expiry), and concurrent requests with the same new token share
one call. Keystone's "not a valid token" (404) is a 401 to the caller; when
Keystone cannot be asked (down, slow, refusing Converge's own credentials) the
request is answered 503 and the reason logged. Tokens are never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import structlog

from services.engine.api.auth import Principal
from services.engine.api.keystone_tokens import (
    TokenCache,
    TokenFacts,
    facts_from_answer,
    principal_for,
    token_key,
)
from shared.errors import ConfigError, TransientError
from shared.settings import EngineSettings

log = structlog.get_logger(__name__)

#: The longest token sent to Keystone; Keystone's own tokens are a few hundred characters.
MAX_TOKEN_CHARS = 4096
#: The largest answer read from Keystone (a token without its catalog is a few KiB).
MAX_ANSWER_BYTES = 1024 * 1024
#: A service token is renewed this long before it expires (seconds).
RENEW_MARGIN_SECONDS = 60.0
#: Connections to Keystone at once: also bounds how hard a flood of made-up tokens presses it.
MAX_CONNECTIONS = 20
UNAVAILABLE = "Token validation is unavailable: Keystone cannot be asked right now; try again later"


class KeystoneUnavailable(TransientError):
    """Keystone could not validate a token now (unreachable, failing, or refusing Converge)."""


@dataclass(frozen=True)
class KeystoneConfig:
    """Keystone mode's settings, read once in `main`."""

    url: str  # the Identity API, ending in /v3
    cache_seconds: float
    cache_size: int
    timeout_seconds: float
    auth: dict[str, Any] = field(repr=False)  # the "auth" of Converge's own login: holds a secret


def keystone_config(settings: EngineSettings) -> KeystoneConfig | None:
    """Keystone mode's settings, or None when CONVERGE_KEYSTONE_URL is unset (static tokens only).
    The settings already checked that credentials are there."""
    if settings.keystone_url is None:
        return None
    url = settings.keystone_url if settings.keystone_url.endswith("/v3") else f"{settings.keystone_url}/v3"
    identity: dict[str, Any]
    scope: dict[str, Any] | None = None
    if settings.keystone_application_credential_id and settings.keystone_application_credential_secret:
        identity = {
            "methods": ["application_credential"],
            "application_credential": {
                "id": settings.keystone_application_credential_id,
                "secret": settings.keystone_application_credential_secret.get_secret_value(),
            },
        }
    else:
        if settings.keystone_username is None or settings.keystone_password is None:
            raise ConfigError("CONVERGE_KEYSTONE_URL needs the service user's name and password")
        identity = {
            "methods": ["password"],
            "password": {
                "user": {
                    "name": settings.keystone_username,
                    "domain": {"name": settings.keystone_user_domain_name},
                    "password": settings.keystone_password.get_secret_value(),
                }
            },
        }
        scope = {
            "project": {
                "name": settings.keystone_project_name,
                "domain": {"name": settings.keystone_project_domain_name},
            }
        }
    return KeystoneConfig(
        url=url,
        auth={"identity": identity, **({"scope": scope} if scope else {})},
        cache_seconds=settings.keystone_cache_seconds,
        cache_size=settings.keystone_cache_size,
        timeout_seconds=settings.keystone_timeout_seconds,
    )


def plausible_token(token: str) -> bool:
    """Whether `token` could be a Keystone token at all: anything else is not sent there."""
    return 0 < len(token) <= MAX_TOKEN_CHARS and token.isascii() and token.isprintable() and " " not in token


@dataclass(frozen=True)
class _Reply:
    status: int
    answer: Any  # the JSON body, or None
    subject_token: str | None  # the X-Subject-Token header (a login's new token)


@dataclass(frozen=True)
class _ServiceToken:
    value: str
    expires_at: float


class KeystoneAuthenticator:
    """`Authenticator` for Keystone tokens (see the module docstring)."""

    def __init__(
        self,
        *,
        session: aiohttp.ClientSession,
        config: KeystoneConfig,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._session, self._config, self._clock = session, config, clock
        self._cache = TokenCache(ttl=config.cache_seconds, size=config.cache_size, clock=clock)
        self._pending: dict[bytes, asyncio.Task[TokenFacts | None]] = {}
        self._service: _ServiceToken | None = None
        self._login_lock = asyncio.Lock()

    async def authenticate(self, token: str) -> Principal | None:
        if not plausible_token(token):
            return None
        facts = await self.facts(token)
        return principal_for(facts) if facts is not None else None

    async def facts(self, token: str) -> TokenFacts | None:
        """What Keystone says about `token` (None = not valid), cached. Concurrent askers about
        one new token share one call, which runs on even if the asker that started it leaves."""
        known = self._cache.lookup(token)
        if known is not None:
            return known.facts
        key = token_key(token)
        task = self._pending.get(key)
        if task is None:
            task = asyncio.create_task(self._validate_and_remember(token), name="keystone-validate")
            self._pending[key] = task
            task.add_done_callback(functools.partial(self._settled, key))
        return await asyncio.shield(task)

    def _settled(self, key: bytes, task: asyncio.Task[TokenFacts | None]) -> None:
        self._pending.pop(key, None)
        if not task.cancelled():
            task.exception()  # retrieved here: every asker may have gone (their 503 is logged)

    async def _validate_and_remember(self, token: str) -> TokenFacts | None:
        facts = await self._validate(token)
        self._cache.remember(token, facts)
        return facts

    async def _validate(self, token: str) -> TokenFacts | None:
        for attempt in range(2):
            service = await self._service_token()
            reply = await self._request(
                "GET", "/auth/tokens?nocatalog", headers={"X-Auth-Token": service, "X-Subject-Token": token}
            )
            status = reply.status
            if status == 200:
                facts = self._read_facts(reply)
                log.debug("keystone_token_validated", user_id=facts.user_id, project_id=facts.project_id)
                return facts
            if status == 404:
                return None
            if status == 401 and attempt == 0:  # our own token expired or was revoked: log in again
                self._service = None
                continue
            if status in (401, 403):
                log.error(
                    "keystone_refuses_converge",
                    status=status,
                    hint="Converge's service user needs the `service` role (or admin) to validate tokens",
                )
            else:
                log.warning("keystone_failed", status=status)
            break
        raise KeystoneUnavailable(UNAVAILABLE)

    async def _service_token(self) -> str:
        async with self._login_lock:
            current = self._service
            if current is None or self._clock() >= current.expires_at - RENEW_MARGIN_SECONDS:
                current = self._service = await self._login()
            return current.value

    async def _login(self) -> _ServiceToken:
        reply = await self._request("POST", "/auth/tokens?nocatalog", body={"auth": self._config.auth})
        token = reply.subject_token
        if reply.status != 201 or not token:
            log.error(
                "keystone_login_failed",
                status=reply.status,
                hint="check CONVERGE_KEYSTONE_USERNAME, _PASSWORD and _PROJECT_NAME "
                "(or the application credential)",
            )
            raise KeystoneUnavailable(UNAVAILABLE)
        facts = self._read_facts(reply)
        log.info("keystone_logged_in", user_id=facts.user_id, expires_at=facts.expires_at)
        return _ServiceToken(token, facts.expires_at)

    @staticmethod
    def _read_facts(reply: _Reply) -> TokenFacts:
        """A token answer's facts; one that cannot be read is logged, and the caller gets 503."""
        try:
            return facts_from_answer(reply.answer)
        except TransientError as exc:
            log.warning("keystone_answer_unreadable", error=str(exc))
            raise KeystoneUnavailable(UNAVAILABLE) from exc

    async def _request(
        self, method: str, path: str, *, body: Any = None, headers: dict[str, str] | None = None
    ) -> _Reply:
        """One call to Keystone; KeystoneUnavailable when there is no answer to read."""
        url = f"{self._config.url}{path}"
        timeout = aiohttp.ClientTimeout(total=self._config.timeout_seconds)
        try:
            async with self._session.request(
                method,
                url,
                json=body,
                headers={"Accept": "application/json", **(headers or {})},
                timeout=timeout,
            ) as response:
                raw = bytearray()
                async for chunk in response.content.iter_chunked(64 * 1024):
                    raw += chunk
                    if len(raw) > MAX_ANSWER_BYTES:
                        log.warning("keystone_answer_too_large", path=path.split("?")[0])
                        raise KeystoneUnavailable(UNAVAILABLE)
                try:
                    answer = json.loads(raw) if raw else None
                except ValueError:
                    answer = None
                return _Reply(response.status, answer, response.headers.get("X-Subject-Token"))
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("keystone_unreachable", url=self._config.url, error=repr(exc))
            raise KeystoneUnavailable(UNAVAILABLE) from exc


@contextlib.asynccontextmanager
async def open_keystone(config: KeystoneConfig | None) -> AsyncIterator[KeystoneAuthenticator | None]:
    """Keystone mode's authenticator and the HTTP session it owns (None: Keystone mode is off)."""
    if config is None:
        yield None
        return
    connector = aiohttp.TCPConnector(limit=MAX_CONNECTIONS)
    async with aiohttp.ClientSession(
        connector=connector, headers={"User-Agent": "converge-engine"}
    ) as session:
        log.info("keystone_mode", url=config.url)
        yield KeystoneAuthenticator(session=session, config=config)
