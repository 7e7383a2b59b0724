"""The one gateway for outbound HTTP: allow-list, redirects, error mapping.

Where it sits: a worker or observer builds one `HttpGateway` at start-up
(around an `aiohttp.ClientSession` it owns and an `AllowList` parsed from
`CONVERGE_HTTP_ALLOWED_HOSTS`) and hands it to plugin actions as `ctx.http`.
Plugins call `request` and get a plain `HttpResponse` record back; they never
see aiohttp. The engine uses the pure `check_url` at template validation time
so a disallowed URL is refused before anything is created.

What it guarantees:
- no request (and no redirect hop) leaves for a host outside the allow list;
- redirects are followed by hand, at most `max_redirects` hops, and
  credentials are not forwarded to another origin;
- driver failures become `TransientError` (connection lost, timeout) or
  `PermanentError` (bad URL, oversized body); `error_for` maps an HTTP status
  to the error tree (429/5xx transient with Retry-After, other 4xx permanent
  carrying the server's message).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urljoin, urlsplit

import aiohttp

from shared.errors import ConfigError, ConvergeError, PermanentError, TransientError

ALLOWED_HOSTS_VARIABLE = "CONVERGE_HTTP_ALLOWED_HOSTS"
DEFAULT_PORTS = {"http": 80, "https": 443}
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# Headers that carry credentials: never forwarded when a redirect changes origin.
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "x-auth-token", "cookie"})
MAX_MESSAGE_CHARS = 500


@dataclass(frozen=True)
class HostRule:
    """One allow-list entry: a host name or address, and a port (None = any)."""

    host: str
    port: int | None = None


def _split_host_port(entry: str) -> tuple[str, str | None]:
    if entry.startswith("["):  # [v6-address] or [v6-address]:port
        address, _, rest = entry[1:].partition("]")
        if not rest:
            return address, None
        return (address, rest[1:]) if rest.startswith(":") else ("", None)
    if entry.count(":") == 1:
        host, _, port = entry.partition(":")
        return host, port
    return entry, None  # a bare name, or an unbracketed IPv6 address


@dataclass(frozen=True)
class AllowList:
    """The hosts outbound HTTP may reach. Empty = nothing is allowed."""

    rules: frozenset[HostRule] = frozenset()

    @classmethod
    def parse(cls, text: str) -> AllowList:
        """Parse "host,host:port,[::1]:8080"; a bare host admits every port."""
        rules: set[HostRule] = set()
        for raw in text.split(","):
            entry = raw.strip()
            if not entry:
                continue
            host, port_text = _split_host_port(entry)
            if not host or (port_text is not None and not port_text.isdigit()):
                raise ConfigError(f"{ALLOWED_HOSTS_VARIABLE}: bad entry {entry!r}; use host or host:port")
            port = int(port_text) if port_text is not None else None
            if port is not None and not 0 < port < 65536:
                raise ConfigError(f"{ALLOWED_HOSTS_VARIABLE}: port out of range in {entry!r}")
            rules.add(HostRule(_normal_host(host), port))
        return cls(frozenset(rules))

    def allows(self, host: str, port: int) -> bool:
        name = _normal_host(host)
        return HostRule(name, None) in self.rules or HostRule(name, port) in self.rules


def _normal_host(host: str) -> str:
    return host.strip().rstrip(".").lower()


def check_url(allow: AllowList, url: str) -> None:
    """Refuse `url` unless it is http(s) to an allowed host and port. Pure."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise PermanentError(f"invalid URL {url!r}: {exc}") from exc
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        raise PermanentError(f"invalid URL {url!r}: need http:// or https:// and a host")
    port = port if port is not None else DEFAULT_PORTS[parts.scheme]
    if not allow.allows(parts.hostname, port):
        raise PermanentError(
            f"host {parts.hostname}:{port} is not allowed for outbound HTTP "
            f"(URL {url!r}); add it to {ALLOWED_HOSTS_VARIABLE}"
        )


@dataclass(frozen=True)
class HttpResponse:
    """A complete response: the final URL after redirects, status, headers
    (lower-case names), body bytes."""

    method: str
    url: str
    status: int
    headers: Mapping[str, str]
    body: bytes

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        """The body as JSON (None when empty); PermanentError when it is not JSON."""
        if not self.body.strip():
            return None
        try:
            return json.loads(self.body)
        except ValueError as exc:
            raise PermanentError(
                f"{self.method} {self.url} returned {self.status} with a body that is not JSON"
            ) from exc

    def message(self) -> str:
        """The server's own error message, as best it can be found."""
        try:
            data = json.loads(self.body) if self.body.strip() else None
        except ValueError:
            data = None
        found = _find_message(data)
        if found is None:
            found = self.body.decode("utf-8", errors="replace").strip()
        return found[:MAX_MESSAGE_CHARS]


def _find_message(data: Any) -> str | None:
    if isinstance(data, str) and data:
        return data
    if isinstance(data, dict):
        for key in ("message", "error", "detail", "title", "description", "explanation"):
            found = _find_message(data.get(key))
            if found:
                return found
    return None


def parse_retry_after(value: str | None, *, now: float) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP-date)."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now)


def error_for(response: HttpResponse, *, now: float) -> ConvergeError | None:
    """The error a non-success status means, or None for 1xx-3xx. Pure."""
    status = response.status
    if status < 400:
        return None
    text = f"{response.method} {response.url} returned {status}"
    detail = response.message()
    if detail:
        text = f"{text}: {detail}"
    if status == 429 or status >= 500:
        retry_after = parse_retry_after(response.headers.get("retry-after"), now=now)
        return TransientError(text, retry_after=retry_after)
    return PermanentError(text)


@runtime_checkable
class HttpClient(Protocol):
    """What plugins need from the gateway; tests may supply their own."""

    async def request(
        self,
        method: str,
        url: str,
        *,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        time_limit: float | None = None,
    ) -> HttpResponse: ...


def _redirect_method(status: int, method: str) -> str:
    """307/308 keep the method and body; 303 (and 301/302 after POST) turn into GET."""
    if status == 303 and method != "HEAD":
        return "GET"
    if status in (301, 302) and method == "POST":
        return "GET"
    return method


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or ""), parts.port


class HttpGateway:
    """Allow-listed HTTP over a caller-owned `aiohttp.ClientSession`."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        allow: AllowList,
        *,
        max_redirects: int = 5,
        default_timeout: float = 30.0,
        max_body_bytes: int = 10 * 1024 * 1024,
    ) -> None:
        self._session = session
        self._allow = allow
        self._max_redirects = max_redirects
        self._default_timeout = default_timeout
        self._max_body_bytes = max_body_bytes

    async def request(
        self,
        method: str,
        url: str,
        *,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        time_limit: float | None = None,
    ) -> HttpResponse:
        """Send one request, following allowed redirects; never raises on status."""
        method = method.upper()
        sent_headers = dict(headers or {})
        body = json
        for _hop in range(self._max_redirects + 1):
            check_url(self._allow, url)
            response = await self._send(method, url, body, sent_headers, time_limit)
            location = response.headers.get("location")
            if response.status not in REDIRECT_STATUSES or not location:
                return response
            target = urljoin(url, location)
            new_method = _redirect_method(response.status, method)
            if new_method != method:
                body = None
            if _origin(target) != _origin(url):
                sent_headers = {k: v for k, v in sent_headers.items() if k.lower() not in CREDENTIAL_HEADERS}
            method, url = new_method, target
        raise PermanentError(f"{method} {url}: more than {self._max_redirects} redirects")

    async def _send(
        self,
        method: str,
        url: str,
        body: Any,
        headers: Mapping[str, str],
        time_limit: float | None,
    ) -> HttpResponse:
        seconds = time_limit if time_limit is not None else self._default_timeout
        try:
            async with self._session.request(
                method,
                url,
                json=body,
                headers=headers,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=seconds),
            ) as resp:
                data = await self._read_body(resp, method, url)
                return HttpResponse(
                    method=method,
                    url=url,
                    status=resp.status,
                    headers={k.lower(): v for k, v in resp.headers.items()},
                    body=data,
                )
        except aiohttp.InvalidURL as exc:
            raise PermanentError(f"{method} {url}: invalid URL") from exc
        except TimeoutError as exc:
            raise TransientError(f"{method} {url}: no response within {seconds:g}s") from exc
        except aiohttp.ClientError as exc:
            raise TransientError(f"{method} {url}: {type(exc).__name__}: {exc}") from exc

    async def _read_body(self, resp: aiohttp.ClientResponse, method: str, url: str) -> bytes:
        chunks: list[bytes] = []
        size = 0
        async for chunk in resp.content.iter_chunked(64 * 1024):
            size += len(chunk)
            if size > self._max_body_bytes:
                raise PermanentError(
                    f"{method} {url}: response body larger than {self._max_body_bytes} bytes"
                )
            chunks.append(chunk)
        return b"".join(chunks)
