"""The plugin contract: declarations (schema) and actions (behaviour).

See `shared.plugins` for the overview. Everything here is I/O-free; the
action context hands plugins the few edges they may use (HTTP, logger).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

import structlog
from pydantic import BaseModel, ConfigDict, Field

from shared.errors import ConvergeError, PermanentError


class UpdateRule(StrEnum):
    """How a change to one property is applied."""

    IN_PLACE = "in_place"
    REPLACE = "replace"


def prop(
    default: Any = ...,
    *,
    description: str,
    update: UpdateRule = UpdateRule.IN_PLACE,
    **kwargs: Any,
) -> Any:
    """Declare a property field: its description and its update rule."""
    return Field(default, description=description, json_schema_extra={"update": update.value}, **kwargs)


class Properties(BaseModel):
    """Base of every type's property schema. Unknown properties are errors.

    Numbers given to string properties become strings, as in Heat (a
    `get_attr` of a number feeding a string property is common in templates).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)


def update_rule(schema: type[Properties], name: str) -> UpdateRule:
    """The update rule declared for property `name` of `schema`. A property the schema
    does not declare is applied in place where the schema accepts undeclared ones
    (`extra="allow"`: the type takes them as they come, as `OS::Heat::None` does), and
    forces replacement where it refuses them (a property the type no longer knows:
    the safe choice)."""
    field = schema.model_fields.get(name)
    if field is None:
        accepts = schema.model_config.get("extra") == "allow"
        return UpdateRule.IN_PLACE if accepts else UpdateRule.REPLACE
    extra = field.json_schema_extra
    if isinstance(extra, dict) and extra.get("update") == UpdateRule.REPLACE.value:
        return UpdateRule.REPLACE
    return UpdateRule.IN_PLACE


class Outcome(StrEnum):
    """What an action achieved when it returned."""

    COMPLETE = "complete"
    IN_PROGRESS = "in_progress"  # an observer must watch until it settles


@dataclass(frozen=True)
class ActionResult:
    """Result of create/update/delete (and of a snapshot: what it kept, as JSON)."""

    physical_id: str | None
    outcome: Outcome = Outcome.COMPLETE
    attributes: Mapping[str, Any] = field(default_factory=dict)
    snapshot: Mapping[str, Any] | None = None


class ObservedState(StrEnum):
    IN_PROGRESS = "in_progress"
    READY = "ready"
    FAILED = "failed"
    GONE = "gone"


@dataclass(frozen=True)
class Observation:
    """What `observe` found: state, attributes, and actual property values
    where the provider exposes them (None = not exposed). `retry_after`: for a
    resource still in progress, the seconds after which looking again is worth
    it, where the provider knows (an ETA); the observer then waits that long
    instead of guessing with its growing pauses. `physical_id`: for a type whose id
    carried an unfinished action's progress, the resource's id now that the action
    is over (None = the id observed stays)."""

    state: ObservedState
    attributes: Mapping[str, Any] = field(default_factory=dict)
    properties: Mapping[str, Any] | None = None
    reason: str = ""
    retry_after: float | None = None
    physical_id: str | None = None


class ReplacementNeeded(ConvergeError):
    """Raised by `update` when the change cannot be applied in place."""


class ResourceGone(PermanentError):
    """Raised by an action that finds its resource no longer exists (e.g. a 404).

    The worker turns it into what that means for the action: an `update` makes
    a new resource (replacement), a `delete` is done, a stack `check` records
    the resource as missing (so the next update creates it again); anything
    else fails with the message.
    """


@dataclass(frozen=True)
class ActionContext:
    """Everything an action may use. Built by the worker/observer per job.

    `idempotency_key` is stable across redeliveries of one job and new for
    every new action. `deadline` is a `time.time()` instant. `http` is the
    shared, allow-listed client (`shared.http_client.HttpGateway`; None where
    no HTTP is allowed). `api_url` is the base URL of Converge's own API
    (e.g. `http://converge.example:8004`), used by types that hand out signal
    URLs. `clock` gives the current `time.time()`-style instant; tests inject
    virtual time. `endpoints` is the catalog of the clouds this process is
    configured to reach, name -> base URL (e.g. "sandbox" ->
    `http://127.0.0.1:8007`, from CONVERGE_SANDBOX_URL); empty when none is.
    """

    stack_id: str
    stack_name: str
    project_id: str
    resource_name: str
    idempotency_key: str
    deadline: float
    cancelled: asyncio.Event
    log: structlog.typing.FilteringBoundLogger
    http: Any = None
    api_url: str = ""
    clock: Callable[[], float] = time.time
    endpoints: Mapping[str, str] = field(default_factory=dict)


class AnyAttributes(Mapping[str, str]):
    """An `attributes` declaration that admits every name (Heat's OS::Heat::None).

    `name in attrs` is always true and `attrs[name]` gives a generic
    description, so `get_attr` on any name validates; iteration is empty, so
    the type's schema lists no attributes. Unreported attributes resolve to None.
    """

    def __getitem__(self, name: str) -> str:
        return "Any attribute; its value is null."

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


class ResourceType:
    """Base class of every resource type. Subclasses set the ClassVars.

    Optional declarations: `attribute_types` (attribute name -> Heat type,
    e.g. "String", "Map"; shown by the type schema), `support_version` (the
    release that introduced the type), and `reference_attribute` (when set,
    `get_resource` resolves to that attribute instead of the physical id, as
    Heat does for OS::Heat::RandomString).

    `replaced_on_update`: the engine replaces the resource in every stack
    update (see the ClassVar), whatever changed.

    Snapshots: a type that sets `supports_snapshot` implements `snapshot` (a stack
    snapshot keeps what it returns; a resource with `deletion_policy: Snapshot` is
    snapshotted before it is deleted) and may override `restore_properties` (how a
    restored stack makes the resource from that data).
    """

    type_name: ClassVar[str]
    description: ClassVar[str] = ""
    properties: ClassVar[type[Properties]] = Properties
    attributes: ClassVar[Mapping[str, str]] = {}
    attribute_types: ClassVar[Mapping[str, str]] = {}
    support_version: ClassVar[str | None] = None
    reference_attribute: ClassVar[str | None] = None
    supports_snapshot: ClassVar[bool] = False
    #: Replaced (a new resource, created first) by every stack update that reaches it, even
    #: with unchanged properties (Heat's OS::Heat::UpdateWaitConditionHandle).
    replaced_on_update: ClassVar[bool] = False

    async def create(self, ctx: ActionContext, props: Properties) -> ActionResult:
        raise NotImplementedError

    async def update(
        self, ctx: ActionContext, physical_id: str, old: Properties, new: Properties
    ) -> ActionResult:
        """Apply `new` in place, or raise `ReplacementNeeded` (`ResourceGone` when the
        resource no longer exists)."""
        raise ReplacementNeeded(f"{self.type_name} cannot be updated in place")

    async def delete(self, ctx: ActionContext, physical_id: str, props: Properties) -> ActionResult:
        """Delete; a resource that is already gone counts as deleted (return, or raise
        `ResourceGone`)."""
        raise NotImplementedError

    async def observe(self, ctx: ActionContext, physical_id: str, props: Properties) -> Observation:
        return Observation(ObservedState.READY)

    async def suspend(self, ctx: ActionContext, physical_id: str, props: Properties) -> ActionResult:
        """Pause the resource (a stack `suspend`). Types with nothing to pause keep the default."""
        return ActionResult(physical_id=physical_id)

    async def resume(self, ctx: ActionContext, physical_id: str, props: Properties) -> ActionResult:
        """Undo `suspend`. Types with nothing to pause keep the default."""
        return ActionResult(physical_id=physical_id)

    async def signal(
        self, ctx: ActionContext, physical_id: str, props: Properties, data: Mapping[str, Any]
    ) -> ActionResult:
        raise ConvergeError(f"{self.type_name} does not accept signals")

    async def snapshot(self, ctx: ActionContext, physical_id: str, props: Properties) -> Mapping[str, Any]:
        """Keep a copy of the resource (types with `supports_snapshot`); return what
        restoring it needs, as JSON (at most a few kilobytes: it is stored with the
        stack's snapshot)."""
        raise PermanentError(f"{self.type_name} takes no snapshots")

    @classmethod
    def restore_properties(cls, properties: Mapping[str, Any], data: Mapping[str, Any]) -> Mapping[str, Any]:
        """The properties (as the template writes them) that make the resource again from
        a snapshot's `data`. By default unchanged: restoring converges to the template."""
        return properties
