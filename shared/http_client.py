"""The one gateway for outbound HTTP: allow-list, redirects, error mapping.

Where it sits: a worker or observer builds one `HttpGateway` at start-up
(around an `aiohttp.ClientSession` it owns and an `AllowList` parsed from
`CONVERGE_HTTP_ALLOWED_HOSTS`) and hands it to plugin actions as `ctx.http`.
Plugins call `request` and get a plain `HttpResponse` record back; they never
see aiohttp. The engine uses the pure `check_url` at template validation time
so a disallowed URL is refused before anything is created.

What it guarantees:
- no request (and no redirect hop) leaves for a host outside the allow list;
- Converge's own ports (`protected_ports`: the API, health and admin ports)
  are refused even on an allowed host unless an entry names that host:port
  exactly (or host:port/path, which admits only paths under that prefix);
- a URL with user information (`user:pass@`) or a fragment (`#...`) is
  refused, so neither can change the host or path that was checked (nor
  swallow a suffix a plugin appends to a base URL);
- redirects are followed by hand, at most `max_redirects` hops, and
  credentials are not forwarded to another origin;
- driver failures become `TransientError` (connection lost, timeout) or
  `PermanentError` (bad URL, oversized body); `error_for` maps an HTTP status
  to the error tree (429/5xx transient with Retry-After, other 4xx permanent
  carrying the server's message).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urldefrag, urljoin, urlsplit

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
    """One allow-list entry: a host name or address, a port (None = any) and a path
    prefix (None = any path; only with a port)."""

    host: str
    port: int | None = None
    path: str | None = None


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


def _path_prefix(text: str) -> str | None:
    """ "/sandbox/" -> "/sandbox"; None for the whole port ("" or "/")."""
    prefix = "/" + text.strip("/")
    return None if prefix == "/" else prefix


# Path spellings that could climb out of a prefix once decoded or normalised.
_PATH_TRICKS = ("%2e", "%2f", "%5c", "\\")


def _within(path: str, prefix: str) -> bool:
    """Whether the raw URL path `path` stays under `prefix` whatever decodes or
    normalises it: no dot segments, no encoded dots, slashes or backslashes."""
    lowered = path.lower()
    if any(trick in lowered for trick in _PATH_TRICKS):
        return False
    if any(segment in (".", "..") for segment in path.split("/")):
        return False
    return path == prefix or path.startswith(prefix + "/")


@dataclass(frozen=True)
class AllowList:
    """The hosts outbound HTTP may reach. Empty = nothing is allowed.

    `protected_ports` are Converge's own (API, health, admin): a bare-host
    entry never admits them, only an entry naming that host:port does."""

    rules: frozenset[HostRule] = frozenset()
    protected_ports: frozenset[int] = frozenset()

    @classmethod
    def parse(cls, text: str, *, protected_ports: Iterable[int] = ()) -> AllowList:
        """Parse "host,host:port,[::1]:8080,host:port/prefix"; a bare host admits every
        port but the protected ones, host:port/prefix only paths under the prefix."""
        rules: set[HostRule] = set()
        for raw in text.split(","):
            entry = raw.strip()
            if not entry:
                continue
            address, slash, path = entry.partition("/")
            host, port_text = _split_host_port(address)
            if not host or (port_text is not None and not port_text.isdigit()):
                raise ConfigError(
                    f"{ALLOWED_HOSTS_VARIABLE}: bad entry {entry!r}; use host, host:port or host:port/path"
                )
            port = int(port_text) if port_text is not None else None
            if port is not None and not 0 < port < 65536:
                raise ConfigError(f"{ALLOWED_HOSTS_VARIABLE}: port out of range in {entry!r}")
            if slash and port is None:
                raise ConfigError(f"{ALLOWED_HOSTS_VARIABLE}: a path needs host:port in {entry!r}")
            rules.add(HostRule(_normal_host(host), port, _path_prefix(path) if slash else None))
        return cls(frozenset(rules), frozenset(protected_ports))

    def allows(self, host: str, port: int, path: str = "/") -> bool:
        name = _normal_host(host)
        for rule in self.rules:
            if rule.host == name and rule.port == port and (rule.path is None or _within(path, rule.path)):
                return True
        return port not in self.protected_ports and HostRule(name, None) in self.rules


def _normal_host(host: str) -> str:
    return host.strip().rstrip(".").lower()


def check_url(allow: AllowList, url: str) -> None:
    """Refuse `url` unless it is http(s) to an allowed host, port and path, without
    user information or a fragment. Pure."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise PermanentError(f"invalid URL {url!r}: {exc}") from exc
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        raise PermanentError(f"invalid URL {url!r}: need http:// or https:// and a host")
    if "@" in parts.netloc:
        raise PermanentError(f"invalid URL {url!r}: user information (user:password@) is not allowed")
    if "#" in url:
        raise PermanentError(f"invalid URL {url!r}: a fragment (#...) is not allowed")
    port = port if port is not None else DEFAULT_PORTS[parts.scheme]
    if not allow.allows(parts.hostname, port, parts.path or "/"):
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


def _redirect_target(url: str, location: str) -> str:
    """Where a redirect points, without its fragment (never sent, and check_url refuses
    one); PermanentError naming the Location when it cannot be read."""
    try:
        return urldefrag(urljoin(url, location)).url
    except ValueError as exc:  # e.g. "http://[::1" (an unclosed IPv6 bracket)
        raise PermanentError(f"{url} redirected to an invalid URL {location!r}: {exc}") from exc


def _origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of a redirect target; PermanentError if it cannot be read."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # e.g. a Location with a port that is not a number, or out of range
        raise PermanentError(f"invalid redirect URL {url!r}: {exc}") from exc
    return parts.scheme, (parts.hostname or ""), port


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
            target = _redirect_target(url, location)
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
