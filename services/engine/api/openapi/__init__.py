"""The OpenAPI 3.1 document of everything the engine's HTTP app serves.

`build_app` mounts the health routes, this document at `/openapi.json`, and
the Heat v1 API. Most of the v1 API hides behind one catch-all aiohttp route,
so the router alone cannot describe it: the paths are written out by hand, by
area — `service_paths` (health, metrics, dashboard, the catalog, the Heat
endpoints answered 501), `stack_paths` (stacks, resources, events, snapshots;
their schemas in `stack_schemas`) and `software_paths` (software configs and
deployments) — from the pieces in `building`, and
tests/integration/test_openapi.py fails when the router or the dispatchers
grow a path this document lacks.

`openapi_document()` is pure data; `openapi_route()` serves it without a
token, like `/healthz` (the auth middleware only guards `/v1/...`).
"""

from __future__ import annotations

from aiohttp import web

from services.engine.api.openapi.building import Json, components
from services.engine.api.openapi.service_paths import catalog_paths, service_paths, unsupported_paths
from services.engine.api.openapi.software_paths import software_config_paths, software_deployment_paths
from services.engine.api.openapi.stack_paths import stack_paths
from services.engine.api.views import json_response


def openapi_document() -> Json:
    """The whole document, rebuilt on each call (it is small); pure."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Converge engine API",
            "version": "1",
            "description": "OpenStack Heat v1 compatible orchestration API, plus health and metrics.",
        },
        "tags": [
            {
                "name": "service",
                "description": "Health, readiness, metrics, this document and the web dashboard.",
            },
            {"name": "stacks", "description": "Stacks, their resources, events and outputs."},
            {"name": "catalog", "description": "Resource types, template versions, validation."},
            {"name": "software", "description": "Software configs (what servers are configured with)."},
            {"name": "unsupported", "description": "Heat endpoints Converge does not implement (501)."},
        ],
        "paths": {
            **service_paths(),
            **stack_paths(),
            **catalog_paths(),
            **software_config_paths(),
            **software_deployment_paths(),
            **unsupported_paths(),
        },
        "components": components(),
    }


def openapi_route() -> web.RouteDef:
    """GET /openapi.json, needing no token."""
    document = openapi_document()

    async def serve(_: web.Request) -> web.Response:
        return json_response(document)

    return web.get("/openapi.json", serve)
