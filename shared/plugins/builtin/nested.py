"""OS::Heat::Stack, ResourceGroup, AutoScalingGroup and ResourceChain: types whose resource
is a child stack.

Where they sit: declared here, like any type, so templates using them validate
(property schemas, attributes) and `resource_type show` describes them; but
their actions are run by the engine, not by a worker: a job of a nested type
becomes an operation of the child stack (`services.engine.nested`), which is
processed as an independent stack by whichever engines take its messages. A
worker handed such a job refuses it with a clear error.

Template resources (a type the environment maps to a template file) need no
declaration: their properties are the template's parameters and their
attributes its outputs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator
from pydantic_core import PydanticCustomError

from shared.errors import PermanentError
from shared.plugins.base import ActionContext, ActionResult, Properties, ResourceType, prop


class NamedAndAnyAttributes(Mapping[str, str]):
    """Attributes with a few documented names that also admit any other name
    (an output of the child stack, or an attribute of every group member)."""

    def __init__(self, named: Mapping[str, str], other: str) -> None:
        self._named = dict(named)
        self._other = other

    def __getitem__(self, name: str) -> str:
        return self._named.get(name, self._other)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str)

    def __iter__(self) -> Iterator[str]:
        return iter(self._named)

    def __len__(self) -> int:
        return len(self._named)


class EngineRun(ResourceType):
    """A type whose actions the engine runs as child-stack operations."""

    async def create(self, ctx: ActionContext, props: Properties) -> ActionResult:
        raise PermanentError(f"{self.type_name} is run by the engine as a nested stack, not by a worker")

    async def update(
        self, ctx: ActionContext, physical_id: str, old: Properties, new: Properties
    ) -> ActionResult:
        raise PermanentError(f"{self.type_name} is run by the engine as a nested stack, not by a worker")

    async def delete(self, ctx: ActionContext, physical_id: str, props: Properties) -> ActionResult:
        raise PermanentError(f"{self.type_name} is run by the engine as a nested stack, not by a worker")


class StackProperties(Properties):
    template: str | dict[str, Any] = prop(
        description="The nested stack's template: a HOT document as text (e.g. from get_file) or a map."
    )
    parameters: dict[str, Any] = prop({}, description="Parameter values of the nested stack.")
    timeout: int | None = prop(
        None, ge=1, description="Minutes each operation of the nested stack may take (unset: no limit)."
    )
    context: dict[str, Any] | None = prop(
        None,
        description="Heat's remote-stack context (region_name, credential_secret_id, ca_cert, "
        "insecure): refused unless empty; a nested stack runs in its parent's region and project.",
    )

    @field_validator("context")
    @classmethod
    def _local_only(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        given = sorted(k for k, v in (value or {}).items() if v not in (None, "", False))
        if given:
            raise PydanticCustomError(
                "remote_stack",
                "{keys}: a stack in another region or cloud is not supported by Converge; "
                "OS::Heat::Stack runs as a nested stack in its parent's region and project "
                "(remove context to run it here)",
                {"keys": ", ".join(given)},
            )
        return value


class NestedStack(EngineRun):
    type_name = "OS::Heat::Stack"
    description = "A stack nested in this one: its template, parameters and timeout are properties."
    properties = StackProperties
    attributes = NamedAndAnyAttributes(
        {
            "outputs": "The nested stack's outputs, as a map of output name to value.",
            "outputs_list": "The nested stack's outputs as a list of {output_key, output_value, "
            "description}.",
            "stack_name": "The nested stack's name.",
        },
        "The value of the nested stack's output of that name.",
    )
    attribute_types = {"outputs": "Map", "outputs_list": "List", "stack_name": "String"}
    support_version = "2014.2"


class _Nested(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)


class ResourceDefinition(_Nested):
    type: str = prop(description="The type of every member.")
    properties: dict[str, Any] | None = prop(None, description="The members' properties.")
    metadata: dict[str, Any] | None = prop(None, description="The members' metadata.")


class RemovalPolicy(_Nested):
    resource_list: list[str] = prop(
        [],
        description="Members to remove, by name or by reference (an entry of the refs attribute); "
        "a removed name is never used again.",
    )


class GroupProperties(Properties):
    count: int = prop(1, ge=0, description="The number of members.")
    index_var: str = prop(
        "%index%",
        min_length=3,
        description="Replaced by the member's index in every string of resource_def.",
    )
    resource_def: ResourceDefinition = prop(description="The definition of every member.")
    removal_policies: list[RemovalPolicy] = prop([], description="Members to remove on the next update.")
    removal_policies_mode: Literal["append", "update"] = prop(
        "append",
        description="append: removed names add to those removed before; update: they replace them.",
    )


class BatchCreate(_Nested):
    max_batch_size: int = prop(1, ge=1, description="The most members created at once.")
    pause_time: float = prop(0, ge=0, description="Seconds to wait between batches.")


class RollingUpdate(_Nested):
    min_in_service: int = prop(0, ge=0, description="The fewest members left alone while a batch is updated.")
    max_batch_size: int = prop(1, ge=1, description="The most members updated at once.")
    pause_time: float = prop(0, ge=0, description="Seconds to wait between batches.")


class GroupUpdatePolicy(_Nested):
    """A ResourceGroup's `update_policy` (Heat's schema): how its members are created
    (`batch_create`) and updated (`rolling_update`) in batches."""

    batch_create: BatchCreate | None = prop(None, description="Create members in batches.")
    rolling_update: RollingUpdate | None = prop(None, description="Update members in batches.")


class ResourceGroup(EngineRun):
    type_name = "OS::Heat::ResourceGroup"
    description = (
        "A group of identical members (resource_def) in a nested stack; scaling creates or removes "
        "only the difference."
    )
    properties = GroupProperties
    attributes = NamedAndAnyAttributes(
        {
            "refs": "The members' reference ids, in index order.",
            "refs_map": "Member name -> reference id.",
            "attributes": "attributes.<name>: member name -> that member's attribute <name>.",
            "outputs": "Member name -> that member's attributes (a template resource's outputs).",
            "removed_rsrc_list": "Names removed by removal_policies (never used again).",
            "resource.<n>": "Member <n>'s reference id; resource.<n>.<name> is one of its attributes.",
        },
        "The list of that attribute of every member, in index order.",
    )
    attribute_types = {
        "refs": "List",
        "refs_map": "Map",
        "attributes": "Map",
        "outputs": "Map",
        "removed_rsrc_list": "List",
    }
    support_version = "2014.1"


class AutoScalingGroupProperties(Properties):
    resource: ResourceDefinition = prop(
        description="The definition of every member, as a resource in a HOT template."
    )
    max_size: int = prop(ge=0, description="The most members the group may have.")
    min_size: int = prop(ge=0, description="The fewest members the group may have.")
    desired_capacity: int | None = prop(
        None,
        ge=0,
        description="The number of members (unset: min_size when created, else the size the group has).",
    )
    cooldown: int | None = prop(
        None, description="Seconds after a scaling during which the group does not scale."
    )
    rolling_updates: RollingUpdate = prop(
        RollingUpdate(), description="How members are replaced when the resource definition changes."
    )

    @model_validator(mode="after")
    def _sizes(self) -> AutoScalingGroupProperties:
        if self.max_size < self.min_size:
            raise PydanticCustomError(
                "sizes",
                "min_size ({min}) can not be greater than max_size ({max})",
                {"min": self.min_size, "max": self.max_size},
            )
        wanted = self.desired_capacity
        if wanted is not None and not self.min_size <= wanted <= self.max_size:
            raise PydanticCustomError(
                "sizes",
                "desired_capacity ({wanted}) must be between min_size ({min}) and max_size ({max})",
                {"wanted": wanted, "min": self.min_size, "max": self.max_size},
            )
        return self


class AutoScalingGroup(EngineRun):
    type_name = "OS::Heat::AutoScalingGroup"
    description = (
        "A group of identical members (resource) in a nested stack, sized between min_size and "
        "max_size; shrinking removes failed members first, then the oldest."
    )
    properties = AutoScalingGroupProperties
    attributes = {
        "current_size": "The number of members.",
        "refs": "The members' reference ids, oldest first.",
        "refs_map": "Member name -> reference id.",
        "outputs": "outputs.<name>: member name -> that member's attribute <name>.",
        "outputs_list": "outputs_list.<name>: that attribute of every member, oldest first.",
    }
    attribute_types = {
        "current_size": "Integer",
        "refs": "List",
        "refs_map": "Map",
        "outputs": "Map",
        "outputs_list": "Map",
    }
    support_version = "2014.1"


class ChainProperties(Properties):
    resources: list[str] = prop(
        description="The types of the chain's members, in order (one member per entry; a type "
        "the resource registry maps is resolved in the chain's child stack).",
    )
    concurrent: bool = prop(
        False,
        description="Create the members at once; when false, each member depends on the one before it.",
    )
    resource_properties: dict[str, Any] | None = prop(
        None, description="The properties given to every member."
    )

    @field_validator("resources")
    @classmethod
    def _named(cls, value: list[str]) -> list[str]:
        for index, name in enumerate(value):
            if not name.strip():
                raise PydanticCustomError(
                    "chain_type", "entry {index} is an empty resource type", {"index": index}
                )
        return value


class ResourceChain(EngineRun):
    type_name = "OS::Heat::ResourceChain"
    description = (
        "Members of the listed types in a nested stack, all given resource_properties; each depends "
        "on the one before it unless concurrent."
    )
    properties = ChainProperties
    attributes = NamedAndAnyAttributes(
        {
            "refs": "The members' reference ids, in chain order.",
            "refs_map": "Member name (its index) -> reference id.",
            "attributes": "attributes.<name>: member name -> that member's attribute <name>.",
            "resource.<n>": "Member <n>'s reference id; resource.<n>.<name> is one of its attributes.",
        },
        "The list of that attribute of every member, in chain order.",
    )
    attribute_types = {"refs": "List", "refs_map": "Map", "attributes": "Map"}
    support_version = "6.0.0"
