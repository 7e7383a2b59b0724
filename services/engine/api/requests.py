"""Request bodies of the Heat v1 API, validated at the boundary (pydantic).

A bad body is a 400 naming the field; templates and environments may be
given as objects or as YAML/JSON text. Everything a request carries ends up
in PostgreSQL text or jsonb columns, which cannot hold a NUL character, an
unpaired surrogate or a non-finite number (NaN, Infinity, 1e400): those are
refused here as 400 rather than failing later in the store as a 500.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from services.engine.template import DEFAULT_LIMITS, TemplateLimits
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
    adopt_stack_data: dict[str, Any] | str | None = None

    def adoption(self, limits: TemplateLimits = DEFAULT_LIMITS) -> AdoptData | None:
        """The abandon document of the stack to adopt (JSON text or an object), if any."""
        if self.adopt_stack_data is None:
            return None
        document = _document(self.adopt_stack_data, "adopt_stack_data", limits)
        try:
            return AdoptData.model_validate(document)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(["adopt_stack_data", *(str(p) for p in err["loc"])])
            raise InvalidInput(str(err["msg"]), path=where) from exc

    def template_document(self, limits: TemplateLimits = DEFAULT_LIMITS) -> dict[str, Any] | None:
        """The template, parsed and checked against the deployment's `limits`."""
        if self.template_url is not None and self.template is None:
            raise InvalidInput("template_url is not supported: send the template itself", path="template_url")
        if self.template is None:
            return None
        return _document(self.template, "template", limits)

    def environment_document(self, limits: TemplateLimits = DEFAULT_LIMITS) -> dict[str, Any]:
        return _document(self.environment, "environment", limits) if self.environment else {}

    def tag_list(self) -> list[str]:
        if self.tags is None:
            return []
        raw = self.tags.split(",") if isinstance(self.tags, str) else self.tags
        return [t.strip() for t in raw if t.strip()]


class AdoptedResource(BaseModel):
    model_config = ConfigDict(extra="ignore")

    resource_id: str | None = Field(None, max_length=255, description="The physical id to take over.")


class AdoptData(BaseModel):
    """What `adopt_stack_data` must hold: the abandon document of a stack."""

    model_config = ConfigDict(extra="ignore")

    template: dict[str, Any] | None = None
    resources: dict[str, AdoptedResource] = Field(default_factory=dict)

    def physical_ids(self) -> dict[str, str]:
        return {name: r.resource_id for name, r in self.resources.items() if r.resource_id}


def _document(source: dict[str, Any] | str, what: str, limits: TemplateLimits) -> dict[str, Any]:
    try:
        document = load_document(source, limits=limits, what=what)
    except DocumentError as exc:
        raise InvalidInput(str(exc), path=what) from exc
    check_storable(document, what)  # YAML text may hold "\0" escapes or .inf / .nan
    return document


def storable_text(text: str) -> bool:
    """Whether PostgreSQL can store (or compare with) `text`."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # an unpaired surrogate, e.g. from the JSON "\ud800"
        return False
    return True


def check_storable(value: Any, where: str) -> None:
    """Refuse (InvalidInput naming the place) what text and jsonb columns cannot hold."""
    pending: list[tuple[Any, str]] = [(value, where)]
    while pending:  # iterative: parsed JSON may be nested as deep as the parser allowed
        item, path = pending.pop()
        if isinstance(item, str) and not storable_text(item):
            raise InvalidInput("NUL characters and unpaired surrogates are not allowed", path=path)
        if isinstance(item, float) and not math.isfinite(item):
            raise InvalidInput("numbers must be finite (no NaN or Infinity)", path=path)
        if isinstance(item, dict):
            for key, child in item.items():
                pending.append((key, path))
                named = f"{path}.{key}" if path else str(key)
                pending.append((child, named if storable_text(str(key)) else path))
        elif isinstance(item, list):
            pending.extend((child, f"{path}[{i}]") for i, child in enumerate(item))


def query_values(request: web.Request, names: Iterable[str]) -> list[str]:
    """Every value of the query parameters `names`, in order; 400 if one cannot be stored."""
    values = [v for name in names for v in request.query.getall(name, [])]
    for value in values:
        if not storable_text(value):
            raise InvalidInput("NUL characters are not allowed in query parameters", path="query")
    return values


async def read_json(request: web.Request) -> Any:
    """The request's JSON body (None when there is none), checked by `check_storable`."""
    if not request.can_read_body:
        return None
    try:
        data = await request.json()
    except RecursionError as exc:  # the decoder's own depth limit; 2 MiB of "[" reaches it
        raise InvalidInput("the request body is nested too deeply") from exc
    except ValueError as exc:  # also UnicodeDecodeError: the body is not UTF-8
        raise InvalidInput(f"the request body is not valid JSON: {exc}") from exc
    check_storable(data, "")
    return data


M = TypeVar("M", bound=BaseModel)


async def parse_body(request: web.Request, model: type[M]) -> M:
    data = await read_json(request)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InvalidInput("the request body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "body"
        raise InvalidInput(str(err["msg"]), path=where) from exc
