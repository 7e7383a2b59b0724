"""Heat v1 routes of software configs (project-level; nothing else is looked up).

    POST   /v1/{project}/software_configs              create (name, group, config, inputs,
                                                      outputs, options)
    GET    /v1/{project}/software_configs              list (limit, marker), oldest first
    GET    /v1/{project}/software_configs/{id}         show one
    DELETE /v1/{project}/software_configs/{id}         delete one

The HTTP edge of the `software_configs` table (`store.software_configs`), in
Heat's shapes: `{"software_config": {...}}` with id, name, group, config,
inputs, outputs, options and creation_time; a list shows id, name, group and
creation_time. A config is found only in its own project: another project's
is 404 exactly as an unknown id. The config resource types
(`services.engine.configs`) store theirs in the same table. A config a
software deployment runs cannot be deleted (400), as in Heat.
"""

from __future__ import annotations

import uuid
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from services.engine.api.deps import ApiDeps
from services.engine.api.errors import bad_request, not_found, too_large
from services.engine.api.requests import read_json
from services.engine.api.stacks import url_project
from services.engine.api.views import json_response, timestamp
from services.engine.configs import config_size
from services.engine.store.software_records import ConfigRecord
from shared.plugins.builtin.software_config import UNGROUPED, ConfigInput, ConfigOutput

MAX_LIST = 1000  # configs one page shows at most
MAX_NAME_CHARS = 255


class ConfigBody(BaseModel):
    """A POST body, as heatclient sends it (unknown fields are ignored, as Heat does)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    group: str = Field(UNGROUPED, min_length=1, max_length=MAX_NAME_CHARS)
    config: str | dict[str, Any] | None = None
    inputs: list[ConfigInput] | None = None
    outputs: list[ConfigOutput] | None = None
    options: dict[str, Any] | None = None


def config_view(record: ConfigRecord, *, detail: bool = True) -> dict[str, Any]:
    """A config as Heat's API shows it (the list leaves out the config itself)."""
    view: dict[str, Any] = {
        "id": str(record.config_id),
        "name": record.name,
        "group": record.group,
        "creation_time": timestamp(record.created_at),
    }
    if detail:
        stored = record.config
        view |= {
            "config": stored.get("config"),
            "inputs": stored.get("inputs") or [],
            "outputs": stored.get("outputs") or [],
            "options": stored.get("options") or {},
        }
    return view


def _config_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise not_found(f"Software config with id {text} not found") from None


class SoftwareConfigRoutes:
    def __init__(self, deps: ApiDeps) -> None:
        self._d = deps

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post("/v1/{project}/software_configs", self.create),
            web.get("/v1/{project}/software_configs", self.index),
            web.get("/v1/{project}/software_configs/{config_id}", self.show),
            web.delete("/v1/{project}/software_configs/{config_id}", self.delete),
        ]

    async def create(self, request: web.Request) -> web.Response:
        project = url_project(request)
        raw = await read_json(request)
        if not isinstance(raw, dict):
            raise bad_request("a software config body is an object with name, group, config, ...")
        try:
            body = ConfigBody.model_validate(raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise bad_request(f"software config {where}: {err['msg']}") from exc
        limit = self._d.api_limits.config_bytes
        size = config_size(body.config if body.config is not None else "")
        if size > limit:
            raise too_large("software config config is too large", limit=limit, size=size)
        stored = {
            "config": body.config,
            "inputs": [i.stored() for i in body.inputs or []],
            "outputs": [o.model_dump() for o in body.outputs or []],
            "options": dict(body.options or {}),
        }
        async with self._d.store.transaction() as tx:
            record = await tx.insert_software_config(uuid.uuid4(), project, body.name, body.group, stored)
        return json_response({"software_config": config_view(record)})

    async def index(self, request: web.Request) -> web.Response:
        project = url_project(request)
        q = request.query
        try:
            limit = max(min(int(q.get("limit", MAX_LIST)), MAX_LIST), 0)
        except ValueError as exc:
            raise bad_request(f"bad paging parameter limit: {exc}") from exc
        async with self._d.store.transaction() as tx:
            after = None
            if "marker" in q:
                marker = _marker(q["marker"])
                after = await tx.software_config(project, marker) if marker is not None else None
                if after is None:
                    raise bad_request(f"bad paging parameter marker: no software config {q['marker']}")
            records = await tx.software_configs(project, limit=limit, after=after)
        return json_response({"software_configs": [config_view(r, detail=False) for r in records]})

    async def show(self, request: web.Request) -> web.Response:
        project = url_project(request)
        config_id = _config_id(request.match_info["config_id"])
        async with self._d.store.transaction() as tx:
            record = await tx.software_config(project, config_id)
        if record is None:
            raise not_found(f"Software config with id {config_id} not found")
        return json_response({"software_config": config_view(record)})

    async def delete(self, request: web.Request) -> web.Response:
        project = url_project(request)
        config_id = _config_id(request.match_info["config_id"])
        async with self._d.store.transaction() as tx:
            if await tx.config_in_use(project, config_id):  # as Heat: a deployment runs it
                refused = f"Software config with id {config_id} can not be deleted as it is referenced."
                raise bad_request(refused)
            deleted = await tx.delete_software_config(project, config_id)
        if not deleted:
            raise not_found(f"Software config with id {config_id} not found")
        return web.Response(status=204)


def _marker(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text)
    except ValueError:
        return None
