"""Request bodies of the Heat v1 API, validated at the boundary (pydantic).

A bad body is a 400 naming the field; templates and environments may be
given as objects or as YAML/JSON text, and are passed on as sent
(`StackBody.goal_spec`): they are parsed in the template pool
(`services.engine.goals`), never on the event loop. Everything a request
carries ends up in PostgreSQL text or jsonb columns, which cannot hold a NUL
character, an unpaired surrogate or a non-finite number (NaN, Infinity,
1e400): those are refused here (and in parsed documents, by the pool) as 400
rather than failing later in the store as a 500 (`services.engine.storable`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar, TypeVar

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from services.engine.core.updates import UpdateSettings
from services.engine.goals import Goal, GoalSpec
from services.engine.storable import check_storable, storable_text
from shared.errors import InvalidInput

__all__ = ["StackBody", "check_storable", "parse_body", "query_values", "read_json", "storable_text"]

STACK_NAME = r"^[a-zA-Z][a-zA-Z0-9_.-]{0,254}$"
MAX_TAG_CHARS = 80  # Heat's limit on one tag
MAX_TAGS = 100  # tags one stack may have
MAX_CLEARED = 1000  # parameters one PATCH may clear


class StackBody(BaseModel):
    """POST /stacks and PUT/PATCH /stacks/{name}/{id}."""

    model_config = ConfigDict(extra="ignore")

    #: Checked storable by the template pool (`goals.parse_goal`), not on the event loop.
    CHECKED_LATER: ClassVar[frozenset[str]] = frozenset(
        {"template", "environment", "parameters", "files", "adopt_stack_data"}
    )

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
    clear_parameters: list[str] = Field(
        default_factory=list,
        max_length=MAX_CLEARED,
        description="PATCH: parameters whose stored values are forgotten (their defaults apply again).",
    )
    converge: bool = Field(
        False,
        description="Update only: observe each existing resource before deciding, so what changed "
        "out of band is corrected by the update.",
    )

    def has_template(self) -> bool:
        """Whether the body gives a template (template_url alone is refused here)."""
        if self.template_url is not None and self.template is None:
            raise InvalidInput("template_url is not supported: send the template itself", path="template_url")
        return self.template is not None

    def goal_spec(self, base: Goal | None = None, *, adopt: bool = False) -> GoalSpec:
        """The goal as sent, for the template pool to parse (over `base`, the stack's
        current goal, when the request keeps what it omits)."""
        self.has_template()
        return GoalSpec(
            self.template,
            self.environment or None,
            self.parameters,
            self.files,
            adopt=self.adopt_stack_data if adopt else None,
            base=base,
            clear=tuple(self.clear_parameters) if base is not None else (),
        )

    def tag_list(self) -> list[str]:
        """The tags given ("a,b" or a list), each at most 80 characters as in Heat."""
        if self.tags is None:
            return []
        raw = self.tags.split(",") if isinstance(self.tags, str) else self.tags
        tags = [t.strip() for t in raw if t.strip()]
        for tag in tags:
            if len(tag) > MAX_TAG_CHARS:
                raise InvalidInput(
                    f'Invalid tag, "{tag[:40]}..." is longer than {MAX_TAG_CHARS} characters', path="tags"
                )
        if len(tags) > MAX_TAGS:
            raise InvalidInput(f"a stack may have at most {MAX_TAGS} tags, not {len(tags)}", path="tags")
        return tags

    def for_create(self) -> StackBody:
        """This body, refused if it carries what only an update takes (as Heat)."""
        if self.converge:
            raise InvalidInput("converge flag only supported in stack update (or update preview) request.")
        return self

    def update_settings(self) -> UpdateSettings:
        """What the body says of the stack's tags, timeout and rollback, and `converge`."""
        given = self.model_fields_set
        return UpdateSettings(
            tags=tuple(self.tag_list()) if "tags" in given and self.tags is not None else None,
            timeout_mins=self.timeout_mins if "timeout_mins" in given else None,
            disable_rollback=self.disable_rollback if "disable_rollback" in given else None,
            converge=self.converge,
        )


def query_values(request: web.Request, names: Iterable[str]) -> list[str]:
    """Every value of the query parameters `names`, in order; 400 if one cannot be stored."""
    values = [v for name in names for v in request.query.getall(name, [])]
    for value in values:
        if not storable_text(value):
            raise InvalidInput("NUL characters are not allowed in query parameters", path="query")
    return values


async def read_json(request: web.Request, *, checked_later: Iterable[str] = ()) -> Any:
    """The request's JSON body (None when there is none), checked by `check_storable`
    except its top-level fields `checked_later` (the template pool checks those)."""
    if not request.can_read_body:
        return None
    try:
        data = await request.json()
    except RecursionError as exc:  # the decoder's own depth limit; 2 MiB of "[" reaches it
        raise InvalidInput("the request body is nested too deeply") from exc
    except ValueError as exc:  # also UnicodeDecodeError: the body is not UTF-8
        raise InvalidInput(f"the request body is not valid JSON: {exc}") from exc
    later = frozenset(checked_later)
    if later and isinstance(data, dict):
        check_storable({k: v for k, v in data.items() if k not in later}, "")
        for key in later & data.keys():
            check_storable(key, "")
    else:
        check_storable(data, "")
    return data


M = TypeVar("M", bound=BaseModel)


async def parse_body(request: web.Request, model: type[M]) -> M:
    """The body as `model`; a model's `CHECKED_LATER` fields (templates and their
    inputs, walked in the template pool) are not walked here, on the event loop."""
    data = await read_json(request, checked_later=getattr(model, "CHECKED_LATER", ()))
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
