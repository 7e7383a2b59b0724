"""Heat v1 routes of software deployments (project-level).

    POST   /v1/{project}/software_deployments                 create (config_id, server_id,
                                                             input_values, action, status, ...)
    GET    /v1/{project}/software_deployments[?server_id=]    list, oldest first
    GET    /v1/{project}/software_deployments/{id}            show one
    PUT    /v1/{project}/software_deployments/{id}            update (the agent's outcome)
    DELETE /v1/{project}/software_deployments/{id}            delete one
    GET    /v1/{project}/software_deployments/metadata/{server_id}
                                                             the server's configs to run
    PUT    /v1/{project}/software_deployments/{id}/signal/{token}
                                                             TEMP_URL_SIGNAL: the agent's outputs
                                                             (Converge's; no X-Auth-Token)

The HTTP edge of the `software_deployments` table, in Heat's shapes:
`{"software_deployment": {...}}` with id, config_id, server_id, input_values,
output_values, action, status, status_reason, creation_time, updated_time.
The metadata is Heat's: the derived configs of the server's deployments,
sorted by config name, each with Converge's `deployment_id`,
`deployment_status` and `deployment_action` added (so an agent knows which
deployment a config is for and whether it waits for a signal).

Who may call: a project token, for everything; a server's agent token (a
Sandbox::Server's `agent_token` attribute) for that server's metadata and
for PUT on a deployment to that server — any other failure with such a token
is the same 401. A PUT that gives an IN_PROGRESS deployment a final status is
its signal: the resource waiting for it completes or fails
(`services.engine.deployments`). A PUT body may be at most CONVERGE_MAX_SIGNAL_BYTES
with an agent token (as a signal), CONVERGE_MAX_SOFTWARE_CONFIG_BYTES with a project
token (413 when its declared size is more, before it is read; a body without a
declared size is bounded by the API's body limit). A deployment is found only in its own project.
A PUT to a deployment's signal URL needs no X-Auth-Token: the token in the URL,
drawn for the run the URL was given for, authorises it
(`services.engine.deployment_urls`); the body is a signal (at most
CONVERGE_MAX_SIGNAL_BYTES, 413 as soon as more is known) and a wrong or stale
token, or an unknown deployment, is one 401.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from services.engine.api.auth import AUTH_REQUIRED, PRINCIPAL
from services.engine.api.deps import ApiDeps
from services.engine.api.errors import bad_request, not_found, too_large, unauthorized
from services.engine.api.requests import read_json
from services.engine.api.resources import signal_body
from services.engine.api.software_configs import config_view
from services.engine.api.stacks import url_project
from services.engine.api.views import json_response, timestamp
from services.engine.signals import Unauthorized
from services.engine.store.software_records import DeploymentChange, DeploymentRecord

MAX_LIST = 1000  # deployments one answer shows at most
MAX_SERVER_CHARS = 255
Status = Literal["IN_PROGRESS", "COMPLETE", "FAILED"]
#: Values of `action` Heat's deployments take.
DeployAction = Literal["INIT", "CREATE", "UPDATE", "DELETE", "SUSPEND", "RESUME"]


class CreateBody(BaseModel):
    """A POST body, as heatclient sends it (unknown fields are ignored, as Heat does)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    config_id: uuid.UUID
    server_id: str = Field(min_length=1, max_length=MAX_SERVER_CHARS)
    input_values: dict[str, Any] = {}
    action: DeployAction = "INIT"
    status: Status = "COMPLETE"
    status_reason: str = Field("", max_length=255)


class UpdateBody(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    config_id: uuid.UUID | None = None
    input_values: dict[str, Any] | None = None
    output_values: dict[str, Any] | None = None
    action: DeployAction | None = None
    status: Status | None = None
    status_reason: str | None = Field(None, max_length=255)


def deployment_view(record: DeploymentRecord) -> dict[str, Any]:
    return {
        "id": str(record.deployment_id),
        "config_id": str(record.config_id),
        "server_id": record.server_id,
        "input_values": dict(record.input_values),
        "output_values": dict(record.output_values),
        "action": record.action,
        "status": record.status,
        "status_reason": record.status_reason,
        "creation_time": timestamp(record.created_at),
        "updated_time": timestamp(record.updated_at) if record.updated_at else None,
    }


def _deployment_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise not_found(f"Software deployment with id {text} not found") from None


def _body(raw: Any, model: type[BaseModel], what: str) -> Any:
    if not isinstance(raw, dict):
        raise bad_request(f"a software deployment {what} body is a JSON object")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise bad_request(f"software deployment {where}: {err['msg']}") from exc


class SoftwareDeploymentRoutes:
    def __init__(self, deps: ApiDeps) -> None:
        self._d = deps

    def routes(self) -> list[web.RouteDef]:
        base = "/v1/{project}/software_deployments"
        return [
            web.post(base, self.create),
            web.get(base, self.index),
            web.get(base + "/metadata/{server_id}", self.metadata),
            web.get(base + "/{deployment_id}", self.show),
            web.put(base + "/{deployment_id}", self.update),
            web.delete(base + "/{deployment_id}", self.delete),
            web.put(base + "/{deployment_id}/signal/{signal_token}", self.put_signal),
        ]

    def _project(self, request: web.Request) -> str:
        """The URL's project, for a request a project token authorised."""
        if PRINCIPAL not in request:
            raise unauthorized(AUTH_REQUIRED)
        return url_project(request)

    async def create(self, request: web.Request) -> web.Response:
        project = self._project(request)
        body: CreateBody = _body(await read_json(request), CreateBody, "create")
        async with self._d.store.transaction() as tx:
            if await tx.software_config(project, body.config_id) is None:
                raise not_found(f"Software config with id {body.config_id} not found")
            record = await tx.insert_software_deployment(
                uuid.uuid4(),
                project,
                server_id=body.server_id,
                config_id=body.config_id,
                input_values=body.input_values,
                action=body.action,
                status=body.status,
                status_reason=body.status_reason,
            )
        return json_response({"software_deployment": deployment_view(record)})

    async def index(self, request: web.Request) -> web.Response:
        project = self._project(request)
        server = request.query.get("server_id")
        async with self._d.store.transaction() as tx:
            records = await tx.software_deployments(project, server_id=server, limit=MAX_LIST)
        return json_response({"software_deployments": [deployment_view(r) for r in records]})

    async def show(self, request: web.Request) -> web.Response:
        project = self._project(request)
        deployment_id = _deployment_id(request.match_info["deployment_id"])
        async with self._d.store.transaction() as tx:
            record = await tx.software_deployment(project, deployment_id)
        if record is None:
            raise not_found(f"Software deployment with id {deployment_id} not found")
        return json_response({"software_deployment": deployment_view(record)})

    async def update(self, request: web.Request) -> web.Response:
        authenticated = PRINCIPAL in request
        project = url_project(request)
        if not authenticated:  # an agent token: one 401 for every failure, before the body
            try:
                deployment_id = uuid.UUID(request.match_info["deployment_id"])
            except ValueError:
                raise unauthorized(AUTH_REQUIRED) from None
        else:
            deployment_id = _deployment_id(request.match_info["deployment_id"])
        limit = self._d.api_limits.signal_bytes if not authenticated else self._d.api_limits.config_bytes
        declared = request.content_length
        if declared is not None and declared > limit:  # an outcome is a signal: refused unread
            raise too_large(
                f"a software deployment update may be at most {limit} bytes; this one is {declared}",
                limit=limit,
                size=declared,
            )
        body: UpdateBody = _body(await read_json(request), UpdateBody, "update")
        change = DeploymentChange(
            config_id=body.config_id,
            input_values=body.input_values,
            output_values=body.output_values,
            action=body.action,
            status=body.status,
            status_reason=body.status_reason,
        )
        if not authenticated and set(change.written()) - {"output_values", "status", "status_reason"}:
            raise unauthorized(AUTH_REQUIRED)  # an agent reports an outcome, nothing more
        try:
            record = await self._d.signals.put_deployment(
                project,
                deployment_id,
                change,
                token=request.headers.get("X-Auth-Token", ""),
                project_token_ok=authenticated,
            )
        except Unauthorized as exc:
            raise unauthorized(AUTH_REQUIRED) from exc
        return json_response({"software_deployment": deployment_view(record)})

    async def put_signal(self, request: web.Request) -> web.Response:
        """A PUT to a deployment's signal URL (TEMP_URL_SIGNAL): the agent's outputs, at most
        CONVERGE_MAX_SIGNAL_BYTES (413 before more is read). Every token but the one the
        deployment's current run was given, and an unknown deployment, are the same 401."""
        project = url_project(request)
        try:
            deployment_id = uuid.UUID(request.match_info["deployment_id"])
        except ValueError:
            raise unauthorized(AUTH_REQUIRED) from None
        details = await signal_body(request, self._d.api_limits.signal_bytes)
        try:
            token = request.match_info["signal_token"]
            await self._d.signals.put_signal_object(project, deployment_id, token, details)
        except Unauthorized as exc:
            raise unauthorized(AUTH_REQUIRED) from exc
        return web.Response(status=201)  # as an object store answers a PUT

    async def delete(self, request: web.Request) -> web.Response:
        project = self._project(request)
        deployment_id = _deployment_id(request.match_info["deployment_id"])
        async with self._d.store.transaction() as tx:
            deleted = await tx.delete_software_deployment(project, deployment_id)
        if not deleted:
            raise not_found(f"Software deployment with id {deployment_id} not found")
        return web.Response(status=204)

    async def metadata(self, request: web.Request) -> web.Response:
        project = url_project(request)
        server = request.match_info["server_id"]
        if PRINCIPAL not in request and not await self._d.signals.agent_may(
            project, server, request.headers.get("X-Auth-Token", "")
        ):
            raise unauthorized(AUTH_REQUIRED)
        items = []
        async with self._d.store.transaction() as tx:
            for record in await tx.software_deployments(project, server_id=server, limit=MAX_LIST):
                config = await tx.software_config(project, record.config_id)
                if config is None:
                    continue
                items.append(
                    config_view(config)
                    | {
                        "deployment_id": str(record.deployment_id),
                        "deployment_status": record.status,
                        "deployment_action": record.action,
                    }
                )
        items.sort(key=lambda item: (item["name"], item["creation_time"]))
        return json_response({"metadata": items})
