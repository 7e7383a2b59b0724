"""Builds the engine's aiohttp application from its parts.

Health and metrics routes are always there, with Heat's discovery routes
(`/v1`, `/healthcheck`, the version document for JSON clients at `/`: see
`discovery`); the Heat v1 API joins when its dependencies are given, with the
dashboard's static files (`/`, `/dashboard/...`, whose data calls are
ordinary `/v1` calls), so `converge up` serves every endpoint on the one API
port. Middlewares run outermost first: Heat-shaped errors, the version
document at `/`, then authentication (static tokens, and Keystone's when
`keystone` is given).
"""

from __future__ import annotations

from collections.abc import Iterable

from aiohttp import web
from aiohttp.typedefs import Middleware

from services.engine.api.auth import Authenticator, Tokens, auth_middleware
from services.engine.api.catalog import CatalogRoutes
from services.engine.api.dashboard import dashboard_routes
from services.engine.api.deps import ApiDeps
from services.engine.api.discovery import discovery_routes, negotiate_root
from services.engine.api.errors import error_middleware, not_found, unauthorized
from services.engine.api.live import on_shutdown_close_streams
from services.engine.api.openapi import openapi_route
from services.engine.api.software_configs import SoftwareConfigRoutes
from services.engine.api.software_deployments import SoftwareDeploymentRoutes
from services.engine.api.stacks import StackRoutes
from shared.health import Readiness

MAX_BODY_BYTES = 2 * 1024 * 1024  # templates are limited to 1 MiB; leave room for JSON framing


def build_app(
    routes: Iterable[web.RouteDef],
    *,
    api: ApiDeps | None = None,
    tokens: Tokens | None = None,
    keystone: Authenticator | None = None,
    readiness: Readiness | None = None,
) -> web.Application:
    """`readiness` (the process's own checks) decides what /healthcheck answers; without
    it /healthcheck only says that the process answers."""
    middlewares: list[Middleware] = [error_middleware, negotiate_root()]
    all_routes = [*routes, openapi_route(), *discovery_routes(lambda: _not_ready(readiness))]
    if api is not None:
        middlewares.append(
            auth_middleware(
                tokens or Tokens({}), not_found=not_found, unauthorized=unauthorized, keystone=keystone
            )
        )
        all_routes += (
            StackRoutes(api).routes()
            + CatalogRoutes(api).routes()
            + SoftwareConfigRoutes(api).routes()
            + SoftwareDeploymentRoutes(api).routes()
            + dashboard_routes()
        )
    # A body holds a template, an environment and files: room for twice the template limit.
    max_body = max(MAX_BODY_BYTES, 2 * api.limits.max_template_bytes + 64 * 1024) if api else MAX_BODY_BYTES
    app = web.Application(client_max_size=max_body, middlewares=middlewares)
    app.add_routes(all_routes)
    if api is not None:
        on_shutdown_close_streams(app)
    return app


def _not_ready(readiness: Readiness | None) -> list[str]:
    if readiness is None:
        return []
    return [f"not ready: {name}" for name, ok in readiness.status().items() if not ok]
