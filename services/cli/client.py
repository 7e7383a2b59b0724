"""The CLI's one gateway to the Heat v1 API: every HTTP request goes through `ApiClient`.

Commands ask for paths relative to `{url}/v1/{project}/` and get parsed JSON
back. Redirects are followed here, re-sending the same method and body (the
API answers 302 from `stacks/NAME` to `stacks/NAME/ID`), but only within the
API's own origin so the token never leaves it. Every failure becomes a
`CliError` carrying the one line the user sees: Heat's `error.message` for
HTTP errors, the URL for a refused connection. The token is sent in
`X-Auth-Token` and appears in no message and no repr.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode, urljoin, urlsplit

import aiohttp

REDIRECTS = (301, 302, 303, 307, 308)
MAX_REDIRECTS = 5
#: Generous: a create of a large template is validated before the API answers.
TIMEOUT = aiohttp.ClientTimeout(total=120, sock_connect=10)


class CliError(Exception):
    """An expected failure; the message is the one line shown to the user (exit 1)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class NotFoundError(CliError):
    """The API answered 404: no such stack, resource, output or event."""


@dataclass(frozen=True)
class Endpoint:
    url: str  # e.g. http://127.0.0.1:8004, without /v1
    project_id: str
    token: str = field(repr=False)

    @property
    def base(self) -> str:
        return f"{self.url}/v1/{quote(self.project_id, safe='')}/"


def segment(value: str) -> str:
    """One path segment (a stack name, resource name, output key), escaped."""
    return quote(value, safe="")


class ApiClient:
    def __init__(self, endpoint: Endpoint, session: aiohttp.ClientSession) -> None:
        self._endpoint = endpoint
        self._session = session

    @classmethod
    @asynccontextmanager
    async def open(cls, endpoint: Endpoint) -> AsyncIterator[ApiClient]:
        async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
            yield cls(endpoint, session)

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        return await self.request("GET", path, params=params)

    async def post(self, path: str, body: Any) -> Any:
        return await self.request("POST", path, body=body)

    async def request(
        self, method: str, path: str, *, body: Any = None, params: Mapping[str, str] | None = None
    ) -> Any:
        """Send one request (following redirects); the parsed JSON answer, or None when empty."""
        url = urljoin(self._endpoint.base, path)
        if params:
            url += "?" + urlencode(params)
        data = json.dumps(body).encode() if body is not None else None
        headers = {"X-Auth-Token": self._endpoint.token, "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        for _ in range(MAX_REDIRECTS + 1):
            status, location, text = await self._send(method, url, data, headers)
            if status not in REDIRECTS:
                return _answer(status, text)
            url = self._redirect_target(url, location)
        raise CliError(f"too many redirects from {self._endpoint.url}")

    async def _send(
        self, method: str, url: str, data: bytes | None, headers: Mapping[str, str]
    ) -> tuple[int, str | None, str]:
        try:
            async with self._session.request(
                method, url, data=data, headers=headers, allow_redirects=False
            ) as response:
                return response.status, response.headers.get("Location"), await response.text()
        except aiohttp.ClientConnectorError as exc:
            code = exc.os_error.errno
            reason = os.strerror(code) if code else str(exc.os_error)
            raise CliError(
                f"cannot connect to {self._endpoint.url} ({reason}): is `converge up` running, "
                "or is CONVERGE_URL / --url right?"
            ) from exc
        except aiohttp.ClientError as exc:
            raise CliError(f"request to {self._endpoint.url} failed: {exc}") from exc
        except TimeoutError as exc:
            raise CliError(f"{self._endpoint.url} did not answer within {TIMEOUT.total:.0f} s") from exc

    def _redirect_target(self, current: str, location: str | None) -> str:
        if not location:
            raise CliError(f"{self._endpoint.url} answered a redirect without a Location")
        target = urljoin(current, location)
        here, there = urlsplit(self._endpoint.url), urlsplit(target)
        if (here.scheme, here.netloc) != (there.scheme, there.netloc):
            raise CliError(f"refusing to follow a redirect away from {self._endpoint.url} to {there.netloc}")
        return target


def _answer(status: int, text: str) -> Any:
    parsed = _json(text)
    if status < 400:
        return parsed
    message = _error_message(parsed) or text.strip()[:200] or f"HTTP {status}"
    if status == 401:
        message += " (check CONVERGE_TOKEN or --token)"
    error = NotFoundError if status == 404 else CliError
    raise error(message, status=status)


def _json(text: str) -> Any:
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _error_message(parsed: Any) -> str | None:
    """Heat's error shape: {"error": {"message": ...}, "title": ..., "explanation": ...}."""
    if not isinstance(parsed, dict):
        return None
    error = parsed.get("error")
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    for key in ("explanation", "title"):
        if parsed.get(key):
            return str(parsed[key])
    return None
