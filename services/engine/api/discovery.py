"""What a Heat client finds before it touches a stack: the version document, `/healthcheck`,
and a plain 501 for the parts of Heat's API that Converge does not implement.

Where it sits: `build_app` mounts these routes next to the health routes, and
the `negotiate_root` middleware in front of the dashboard's page at `/`.

- `GET /` answers Heat's version document (300 Multiple Choices, as Heat's API
  does) to a client that prefers JSON over HTML by its Accept header, as
  keystoneauth's discovery does (`Accept: application/json`); browsers, curl
  and anything else that does not prefer JSON get the dashboard's page.
  `GET /v1` and `/v1/` answer the same document (200), needing no token.
- `/healthcheck` answers the way oslo.middleware's healthcheck app answers for
  Heat's API: 200 while the process takes work and 503 while it does not
  (draining), the reasons as text/plain (the default), application/json or
  text/html by the Accept header; HEAD answers 204 or 503 without a body.
- Software configs and deployments and the service list answer 501 "... not
  supported by Converge" instead of looking like a missing stack.

Choosing by Accept is pure (`preferred`); nothing here reads a store.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from services.engine.api.errors import http_error

API_VERSION = "v1.0"
#: Heat's API answers the version list with 300 Multiple Choices.
MULTIPLE_CHOICES = 300
#: What /healthcheck can render, in the order a tie is decided (oslo's order).
HEALTH_TYPES = ("text/plain", "text/html", "application/json")
#: Accept ranges beyond this many are ignored: a header is bounded, this keeps parsing trivially cheap.
MAX_ACCEPT_RANGES = 50


@dataclass(frozen=True)
class Unsupported:
    method: str
    path: str  # as documented in /openapi.json; aiohttp ignores the parameter names
    what: str  # e.g. "software configs"

    @property
    def message(self) -> str:
        return MESSAGES[self.what]


SERVICES = "the service list"
MESSAGES = {
    SERVICES: "The orchestration service list is not supported by Converge: see /healthcheck and /readyz",
}

_V1 = "/v1/{project_id}"
#: Heat endpoints with no stack in the path that Converge does not implement.
UNSUPPORTED = (Unsupported("GET", f"{_V1}/services", SERVICES),)


def not_supported(message: str) -> web.HTTPException:
    return http_error(501, message, "NotSupported")


def preferred(accept: str | None, offers: Sequence[str]) -> str | None:
    """The offer the Accept header rates highest (the first offer wins a tie); None if
    it accepts none of them. No header accepts anything."""
    ranges: list[tuple[str, float]] = []
    for part in (accept or "*/*").split(",")[:MAX_ACCEPT_RANGES]:
        media, *params = (p.strip() for p in part.split(";"))
        quality = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = min(max(float(value), 0.0), 1.0)
                except ValueError:
                    quality = 0.0
        if media:
            ranges.append((media.lower(), quality))
    best: tuple[float, str] | None = None
    for offer in offers:
        quality = _quality(offer, ranges)
        if quality > 0 and (best is None or quality > best[0]):
            best = (quality, offer)
    return best[1] if best else None


def _quality(offer: str, ranges: Sequence[tuple[str, float]]) -> float:
    """The quality of the most specific range matching `offer` (type/subtype > type/* > */*)."""
    kind = offer.split("/")[0]
    found: tuple[int, float] = (-1, 0.0)
    for media, quality in ranges:
        specificity = {offer: 2, f"{kind}/*": 1, "*/*": 0}.get(media, -1)
        if specificity > found[0]:
            found = (specificity, quality)
    return found[1]


def wants_json(request: web.Request) -> bool:
    """Whether the client rates JSON above HTML (a tie goes to HTML: the dashboard)."""
    return preferred(request.headers.get("Accept"), ("text/html", "application/json")) == "application/json"


def version_document(request: web.Request) -> dict[str, object]:
    href = f"{request.url.origin()}/v1/"
    return {"versions": [{"id": API_VERSION, "status": "CURRENT", "links": [{"rel": "self", "href": href}]}]}


def _versions(request: web.Request, status: int) -> web.Response:
    return web.Response(
        text=json.dumps(version_document(request)), status=status, content_type="application/json"
    )


def negotiate_root() -> Middleware:
    """`GET /` from a client that prefers JSON to HTML: the version document, as Heat
    answers it; everything else goes on to the dashboard's page."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path == "/" and request.method in ("GET", "HEAD") and wants_json(request):
            return _versions(request, MULTIPLE_CHOICES)
        return await handler(request)

    return middleware


def discovery_routes(healthy: Callable[[], list[str]]) -> list[web.RouteDef]:
    """`/v1`, `/v1/` and `/healthcheck` (`healthy` names what keeps the process from
    taking work; empty when it takes work), and the unsupported Heat endpoints."""

    async def versions(request: web.Request) -> web.Response:
        return _versions(request, 200)

    async def healthcheck(request: web.Request) -> web.Response:
        problems = healthy()
        status = 503 if problems else 200
        if request.method == "HEAD":
            return web.Response(status=status if problems else 204)
        reasons = problems or ["OK"]
        kind = preferred(request.headers.get("Accept"), HEALTH_TYPES) or HEALTH_TYPES[0]
        if kind == "application/json":
            body = json.dumps({"reasons": reasons, "detailed": False}, indent=4, sort_keys=True)
        elif kind == "text/html":
            items = "".join(f"<li>{html.escape(r)}</li>" for r in reasons)
            body = f"<html><head><title>Healthcheck Status</title></head><body><ul>{items}</ul></body></html>"
        else:
            body = "\n".join(reasons)
        return web.Response(text=body, status=status, content_type=kind, charset="utf-8")

    def refuse(message: str) -> Handler:
        async def handler(_: web.Request) -> web.StreamResponse:
            raise not_supported(message)

        return handler

    return [
        web.get("/v1", versions),
        web.get("/v1/", versions),
        web.get("/healthcheck", healthcheck),  # and HEAD, which aiohttp routes to it too
        *(web.route(u.method, u.path, refuse(u.message)) for u in UNSUPPORTED),
    ]
