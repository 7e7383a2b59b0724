"""The OpenAPI paths of software configs and software deployments.

Where it sits: `openapi_document` (this package) gathers these with the
other areas' paths. A config is what a server is configured with; a
deployment runs one on a server, and the server's agent reads its derived
configs (`.../software_deployments/metadata/{server_id}`) and signals the
outcome with a final status, or with TEMP_URL_SIGNAL a PUT to the
deployment's signal URL (`api.software_configs`, `api.software_deployments`).
Pure data.
"""

from __future__ import annotations

from services.engine.api.openapi.building import (
    PAGING,
    Json,
    json_content,
    list_of,
    obj,
    operation,
    query_param,
)

_SOFTWARE_CONFIG = obj(
    {
        "id": {"type": "string", "format": "uuid"},
        "name": {"type": "string"},
        "group": {"type": "string", "description": "The tool that runs it (default Heat::Ungrouped)."},
        "config": {
            "type": ["string", "object", "null"],
            "description": "Script or manifest (a map: structured).",
        },
        "inputs": {"type": "array", "items": {"type": "object"}},
        "outputs": {"type": "array", "items": {"type": "object"}},
        "options": {"type": "object"},
        "creation_time": {"type": "string", "format": "date-time"},
    }
)
_SOFTWARE_CONFIG_BODY = obj(
    {
        "name": {"type": "string", "maxLength": 255},
        "group": {"type": "string", "maxLength": 255},
        "config": {
            "type": ["string", "object", "null"],
            "description": "At most CONVERGE_MAX_SOFTWARE_CONFIG_BYTES (default 1 MiB); more is 413.",
        },
        "inputs": {
            "type": "array",
            "items": {"type": "object"},
            "description": "Each: name, description, type, default, replace_on_change.",
        },
        "outputs": {
            "type": "array",
            "items": {"type": "object"},
            "description": "Each: name, description, type, error_output.",
        },
        "options": {"type": "object"},
    },
    required=("name",),
)


def software_config_paths() -> Json:
    configs = "/v1/{project_id}/software_configs"
    one = ("project_id", "config_id")
    shown = json_content(obj({"software_config": _SOFTWARE_CONFIG}), "The config.")
    return {
        configs: {
            "get": operation(
                "List the project's software configs, oldest first (id, name, group, creation_time)",
                {"200": json_content(list_of("software_configs", _SOFTWARE_CONFIG), "OK.")},
                params=("project_id",),
                query=PAGING[:2],
                tag="software",
            ),
            "post": operation(
                "Create a software config",
                {"200": shown},
                params=("project_id",),
                body=_SOFTWARE_CONFIG_BODY,
                errors=(413,),
                tag="software",
            ),
        },
        f"{configs}/{{config_id}}": {
            "get": operation("Show a software config", {"200": shown}, params=one, tag="software"),
            "delete": operation(
                "Delete a software config", {"204": {"description": "Deleted."}}, params=one, tag="software"
            ),
        },
    }


_SOFTWARE_DEPLOYMENT = obj(
    {
        "id": {"type": "string", "format": "uuid"},
        "config_id": {"type": "string", "format": "uuid", "description": "The config the server runs."},
        "server_id": {"type": "string"},
        "input_values": {"type": "object"},
        "output_values": {"type": "object", "description": "What the server's agent reported."},
        "action": {"type": "string", "enum": ["INIT", "CREATE", "UPDATE", "DELETE", "SUSPEND", "RESUME"]},
        "status": {"type": "string", "enum": ["IN_PROGRESS", "COMPLETE", "FAILED"]},
        "status_reason": {"type": "string"},
        "creation_time": {"type": "string", "format": "date-time"},
        "updated_time": {"type": ["string", "null"], "format": "date-time"},
    }
)


def software_deployment_paths() -> Json:
    deployments = "/v1/{project_id}/software_deployments"
    one = ("project_id", "deployment_id")
    shown = json_content(obj({"software_deployment": _SOFTWARE_DEPLOYMENT}), "The deployment.")
    return {
        deployments: {
            "get": operation(
                "List the project's software deployments (to one server with server_id), oldest first",
                {"200": json_content(list_of("software_deployments", _SOFTWARE_DEPLOYMENT), "OK.")},
                params=("project_id",),
                query=(query_param("server_id", {"type": "string"}, "Only the deployments to this server."),),
                tag="software",
            ),
            "post": operation(
                "Create a software deployment of a config to a server",
                {"200": shown},
                params=("project_id",),
                body=_SOFTWARE_DEPLOYMENT,
                tag="software",
            ),
        },
        f"{deployments}/metadata/{{server_id}}": {
            "get": operation(
                "The derived configs a server's agent runs (a project token, or the server's agent token)",
                {"200": json_content(list_of("metadata", _SOFTWARE_CONFIG), "OK.")},
                params=("project_id", "server_id"),
                tag="software",
            )
        },
        f"{deployments}/{{deployment_id}}": {
            "get": operation("Show a software deployment", {"200": shown}, params=one, tag="software"),
            "put": operation(
                "Update a software deployment; a final status on one in progress is its server's signal "
                "(a project token, or the server's agent token)",
                {"200": shown},
                params=one,
                body=_SOFTWARE_DEPLOYMENT,
                tag="software",
            ),
            "delete": operation(
                "Delete a software deployment",
                {"204": {"description": "Deleted."}},
                params=one,
                tag="software",
            ),
        },
        f"{deployments}/{{deployment_id}}/signal/{{signal_token}}": {
            "put": operation(
                "TEMP_URL_SIGNAL: the server's agent PUTs its outputs (deploy_stdout, deploy_stderr, "
                "deploy_status_code, the config's outputs) to the URL in the deploy_signal_id input; the "
                "token in the URL authorises it (no X-Auth-Token needed), any other token is 401",
                {"201": {"description": "Stored: the deployment's outputs, its waiting resource completed."}},
                params=(*one, "signal_token"),
                body={"type": "object"},
                errors=(413,),
                tag="software",
            )
        },
    }
