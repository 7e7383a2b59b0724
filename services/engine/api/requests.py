"""Request bodies of the Heat v1 API, validated at the boundary (pydantic).

A bad body is a 400 naming the field; templates and environments may be
given as objects or as YAML/JSON text.
"""

from __future__ import annotations

from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from services.engine.template import DEFAULT_LIMITS
from services.engine.template.loader import DocumentError, load_document
from shared.errors import InvalidInput

STACK_NAME = r"^[a-zA-Z][a-zA-Z0-9_.-]{0,254}$"


class StackBody(BaseModel):
    """POST /stacks and PUT/PATCH /stacks/{name}/{id}."""

    model_config = ConfigDict(extra="ignore")

    stack_name: str | None = Field(None, pattern=STACK_NAME)
    template: dict[str, Any] | str | None = None
    template_url: str | None = None
    parameters: dict[str, Any] = Field(default_factory=dict)
    environment: dict[str, Any] | str = Field(default_factory=dict)
    files: dict[str, str] = Field(default_factory=dict)
    disable_rollback: bool = True
    timeout_mins: int | None = Field(None, ge=1, le=10_080)
    tags: str | list[str] | None = None
    existing: bool = False

    def template_document(self) -> dict[str, Any] | None:
        if self.template_url is not None and self.template is None:
            raise InvalidInput("template_url is not supported: send the template itself", path="template_url")
        if self.template is None:
            return None
        return _document(self.template, "template")

    def environment_document(self) -> dict[str, Any]:
        return _document(self.environment, "environment") if self.environment else {}

    def tag_list(self) -> list[str]:
        if self.tags is None:
            return []
        raw = self.tags.split(",") if isinstance(self.tags, str) else self.tags
        return [t.strip() for t in raw if t.strip()]


def _document(source: dict[str, Any] | str, what: str) -> dict[str, Any]:
    try:
        return load_document(source, limits=DEFAULT_LIMITS, what=what)
    except DocumentError as exc:
        raise InvalidInput(str(exc), path=what) from exc


M = TypeVar("M", bound=BaseModel)


async def parse_body(request: web.Request, model: type[M]) -> M:
    try:
        data = await request.json() if request.can_read_body else {}
    except ValueError as exc:
        raise InvalidInput(f"the request body is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidInput("the request body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "body"
        raise InvalidInput(str(err["msg"]), path=where) from exc
