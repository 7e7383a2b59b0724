"""Builds the engine's aiohttp application from its parts.

Routes are passed in (health and metrics now; the Heat v1 API, dashboard and
sandbox join as their issues land), so `converge up` can serve every
service's endpoints on the one API port.
"""

from __future__ import annotations

from collections.abc import Iterable

from aiohttp import web

MAX_BODY_BYTES = 2 * 1024 * 1024  # templates are limited to 1 MiB; leave room for JSON framing


def build_app(routes: Iterable[web.RouteDef]) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app.add_routes(list(routes))
    return app
