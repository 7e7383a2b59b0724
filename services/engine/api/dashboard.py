"""The web dashboard's static files: `/` (its page), `/dashboard/{file}`, and
`/favicon.ico` (a redirect to its icon, for what asks there without reading the page).

Plain HTML, CSS and ES modules committed under `services/engine/dashboard/static`,
served as they are (no build step, nothing fetched from elsewhere). They hold
no data, so they need no token; the page signs in with a token kept in the
browser session and sends it as `X-Auth-Token` on every `/v1` call.
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from services.engine.api.errors import not_found

STATIC = Path(__file__).resolve().parent.parent / "dashboard" / "static"
CONTENT_TYPES = {
    ".html": "text/html",
    ".css": "text/css",
    ".js": "text/javascript",
    ".svg": "image/svg+xml",
}
#: The page may load only its own files, and talk only to its own origin.
POLICY = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)


def _serve(name: str) -> web.Response:
    # Only the files that are there, by their plain name: no sub-directories, no dot files.
    path = STATIC / name
    if "/" in name or name.startswith(".") or path.suffix not in CONTENT_TYPES or not path.is_file():
        raise not_found(f"no dashboard file {name!r}")
    return web.Response(
        body=path.read_bytes(),
        content_type=CONTENT_TYPES[path.suffix],
        charset="utf-8",
        headers={
            "Cache-Control": "no-cache",
            "Content-Security-Policy": POLICY,
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
        },
    )


def dashboard_routes() -> list[web.RouteDef]:
    async def index(_: web.Request) -> web.Response:
        return _serve("index.html")

    async def asset(request: web.Request) -> web.Response:
        return _serve(request.match_info["file"])

    async def favicon(_: web.Request) -> web.Response:
        raise web.HTTPMovedPermanently("/dashboard/favicon.svg")

    return [web.get("/", index), web.get("/dashboard/{file}", asset), web.get("/favicon.ico", favicon)]
