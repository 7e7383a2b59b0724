"""The OpenAPI paths of the service (health, metrics, dashboard, version
document), the catalog (resource types, template versions, validation,
build info), and the Heat endpoints Converge does not implement.

Where it sits: `openapi_document` (this package) gathers these with the
stack and software paths. The service paths need no token; the unsupported
ones are listed in `api.discovery.UNSUPPORTED` and each answers 501 naming
what. Pure data.
"""

from __future__ import annotations

import re

from services.engine.api.discovery import UNSUPPORTED
from services.engine.api.openapi.building import (
    ANY_OBJECT,
    Json,
    bool_query,
    json_content,
    list_of,
    obj,
    operation,
    path_param,
    query_param,
    ref,
)

_VERSIONS = list_of(
    "versions",
    obj({"id": {"type": "string"}, "status": {"type": "string"}, "links": {"type": "array"}}),
)


def service_paths() -> Json:
    def plain(summary: str, description: str, content_type: str = "application/json") -> Json:
        ok = {"description": description, "content": {content_type: {"schema": {}}}}
        return {"get": operation(summary, {"200": ok}, tag="service", v1=False)}

    versions = {
        "get": operation(
            "Heat's version document (no token needed)",
            {"200": json_content(_VERSIONS, "The API versions.")},
            tag="service",
            v1=False,
        )
    }
    ready = plain("Readiness: every named check is true", "Ready.")
    ready["get"]["responses"]["503"] = json_content(ANY_OBJECT, "Not ready, naming the failing checks.")
    return {
        "/healthz": plain("Liveness: the event loop answers", "Alive."),
        "/readyz": ready,
        "/metrics": plain("Prometheus metrics", "Text exposition format.", "text/plain"),
        "/openapi.json": plain("This document", "The OpenAPI document."),
        "/": {
            "get": operation(
                "The web dashboard's page (no data; it signs in with a token); Heat's version "
                "document for a client that prefers JSON",
                {
                    "200": {"description": "HTML.", "content": {"text/html": {"schema": {}}}},
                    "300": json_content(_VERSIONS, "The version document (Accept: application/json)."),
                },
                tag="service",
                v1=False,
            )
        },
        "/v1": versions,
        "/v1/": versions,
        "/healthcheck": {
            "get": operation(
                "Health as Heat's API reports it (oslo.middleware healthcheck); HEAD answers 204 or 503",
                {
                    "200": {
                        "description": "Taking work: OK (text/plain, application/json or text/html).",
                        "content": {kind: {"schema": {}} for kind in ("text/plain", "application/json")},
                    },
                    "503": {
                        "description": "Not taking work (draining); the reasons.",
                        "content": {kind: {"schema": {}} for kind in ("text/plain", "application/json")},
                    },
                },
                tag="service",
                v1=False,
            )
        },
        "/dashboard/{file}": {
            "get": {
                **operation(
                    "A file of the web dashboard (HTML, CSS, JavaScript modules)",
                    {
                        "200": {"description": "The file.", "content": {"*/*": {"schema": {}}}},
                        "404": ref("responses", "Error404"),
                    },
                    tag="service",
                    v1=False,
                ),
                "parameters": [path_param("file", "A file name, e.g. app.js.")],
            }
        },
        "/favicon.ico": {
            "get": operation(
                "The dashboard's icon: a redirect to /dashboard/favicon.svg",
                {"301": {"description": "Moved to /dashboard/favicon.svg."}},
                tag="service",
                v1=False,
            )
        },
    }


def catalog_paths() -> Json:
    def get(summary: str, ok: Json, *, params: tuple[str, ...], query: tuple[Json, ...] = ()) -> Json:
        return {
            "get": operation(
                summary, {"200": json_content(ok, "OK.")}, params=params, query=query, tag="catalog"
            )
        }

    v1 = "/v1/{project_id}"
    return {
        f"{v1}/resource_types": get(
            "List resource types",
            list_of("resource_types", {}),
            params=("project_id",),
            query=(
                query_param("name", {"type": "string"}, "Only types whose name contains this text."),
                bool_query("with_description", "Give each type's description too."),
            ),
        ),
        f"{v1}/resource_types/{{type_name}}": get(
            "Show a resource type's schema", ANY_OBJECT, params=("project_id", "type_name")
        ),
        f"{v1}/resource_types/{{type_name}}/template": get(
            "A template using a resource type",
            ANY_OBJECT,
            params=("project_id", "type_name"),
            query=(
                query_param("template_type", {"type": "string", "enum": ["hot"]}, "Only hot is produced."),
            ),
        ),
        f"{v1}/template_versions": get(
            "List template versions", list_of("template_versions", ANY_OBJECT), params=("project_id",)
        ),
        f"{v1}/template_versions/{{version}}/functions": get(
            "List a template version's functions",
            list_of("template_functions", ANY_OBJECT),
            params=("project_id", "version"),
            query=(bool_query("with_condition_func", "Include the condition functions."),),
        ),
        f"{v1}/validate": {
            "post": operation(
                "Validate a template",
                {"200": json_content(ANY_OBJECT, "Its description and parameters.")},
                params=("project_id",),
                body=ref("schemas", "StackBody"),
                tag="catalog",
            )
        },
        f"{v1}/build_info": get(
            "What is running: the API's and the engine's revision (Converge's version)",
            obj(
                {
                    "api": obj({"revision": {"type": "string"}}),
                    "engine": obj({"revision": {"type": "string"}}),
                }
            ),
            params=("project_id",),
        ),
    }


def unsupported_paths() -> Json:
    """Heat endpoints Converge does not implement: each answers 501 naming what."""
    paths: Json = {}
    for method, path, what in [(u.method, u.path, u.what) for u in UNSUPPORTED]:
        params = tuple(re.findall(r"\{(\w+)\}", path))
        paths.setdefault(path, {})[method.lower()] = operation(
            f"Not supported by Converge: {what}",
            {},
            params=params,
            errors=(501,),
            tag="unsupported",
        )
    return paths
