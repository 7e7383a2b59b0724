"""OS::Heat::SoftwareConfig, StructuredConfig, CloudConfig and MultipartMime.

Where they sit: declared here like any type (property schemas, attributes,
`resource_type show`), but their configs live in the engine's
`software_configs` table, which only the engine writes; so, like nested
stacks, their jobs are run by the engine (`services.engine.configs`), in the
transaction that issues them, and a worker handed one refuses it. The
resource's physical id is the config's id; attribute `config` is the stored
config (text, or a map for StructuredConfig). Every property replaces the
resource when it changes: a config is immutable, as in Heat.

The pure parts the engine uses: `config_spec` (what a resource stores, from
its properties; MultipartMime's referenced configs passed in) and
`referenced_ids` (which of a MultipartMime's parts may name other configs).
"""

from __future__ import annotations

import email
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from shared.errors import PermanentError
from shared.plugins.base import ActionContext, ActionResult, Properties, ResourceType, UpdateRule, prop

UNGROUPED = "Heat::Ungrouped"
CONFIG_TYPES = (
    "OS::Heat::SoftwareConfig",
    "OS::Heat::StructuredConfig",
    "OS::Heat::CloudConfig",
    "OS::Heat::MultipartMime",
)

IoType = Literal["String", "Number", "CommaDelimitedList", "Json", "Boolean"]


class ConfigInput(BaseModel):
    """One input of a config (Heat's inputs schema)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=255, description="Name of the input.")
    description: str | None = Field(None, description="Description of the input.")
    type: IoType = Field("String", description="Type of the value of the input.")
    default: Any = Field(None, description="Default value for the input if none is specified.")
    replace_on_change: bool = Field(
        False, description="Replace the deployment instead of updating it when the input value changes."
    )
    value: Any = Field(
        None, description="The input's value (a derived config carries it, as a deployment gives it)."
    )

    def stored(self) -> dict[str, Any]:
        """As stored and shown: `value` only when one was given."""
        return self.model_dump(exclude=set() if "value" in self.model_fields_set else {"value"})


class ConfigOutput(BaseModel):
    """One output of a config (Heat's outputs schema)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=255, description="Name of the output.")
    description: str | None = Field(None, description="Description of the output.")
    type: IoType = Field("String", description="Type of the value of the output.")
    error_output: bool = Field(
        False, description="Whether a non-empty value of this output means the deployment failed."
    )


def _replace(default: Any = ..., *, description: str, **kwargs: Any) -> Any:
    return prop(default, description=description, update=UpdateRule.REPLACE, **kwargs)


class SoftwareConfigProperties(Properties):
    group: str = _replace(
        UNGROUPED,
        description="Namespace to group this software config by when delivered to a server "
        "(which configuration tool performs it).",
    )
    config: str | None = _replace(None, description="Configuration script or manifest for the tool.")
    options: dict[str, Any] | None = _replace(None, description="Map of options specific to the tool.")
    inputs: list[ConfigInput] | None = _replace(None, description="Schema of the config's inputs.")
    outputs: list[ConfigOutput] | None = _replace(None, description="Schema of the config's outputs.")


class StructuredConfigProperties(SoftwareConfigProperties):
    config: dict[str, Any] | None = _replace(  # type: ignore[assignment]
        None, description="Map representing the configuration data structure."
    )


class CloudConfigProperties(Properties):
    cloud_config: dict[str, Any] | None = _replace(
        None, description="Map representing the cloud-config data structure, formatted as YAML."
    )


class MimePart(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)

    config: str = Field(
        description="Content of the part, inline or the id of another software config resource."
    )
    filename: str | None = Field(None, description="Optional filename to associate with the part.")
    type: Literal["text", "multipart"] = Field("text", description="Whether the part is text or multipart.")
    subtype: str | None = Field(None, description="Optional subtype to specify with the type.")


class MultipartMimeProperties(Properties):
    parts: list[MimePart] = _replace([], description="Parts belonging to this message.")


@dataclass(frozen=True)
class ConfigSpec:
    """What a config resource stores: Heat's software config fields."""

    group: str
    config: Any
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    options: dict[str, Any]

    def stored(self) -> dict[str, Any]:
        """The `config` column: everything but the name and group."""
        return {
            "config": self.config,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "options": self.options,
        }


def referenced_ids(props: Properties) -> list[uuid.UUID]:
    """The parts of a MultipartMime that look like config ids (Heat looks them up;
    one that is not found is used as inline text)."""
    if not isinstance(props, MultipartMimeProperties):
        return []
    return [i for i in (_as_id(part.config) for part in props.parts) if i is not None]


def _as_id(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text)
    except ValueError:
        return None


def config_spec(props: Properties, referenced: Mapping[uuid.UUID, Any] | None = None) -> ConfigSpec:
    """What a resource with these properties stores. Pure. `referenced`: the `config`
    of each config a MultipartMime part names, by id (only those found)."""
    if isinstance(props, SoftwareConfigProperties):  # StructuredConfig too
        return ConfigSpec(
            group=props.group,
            config=props.config,
            inputs=[i.stored() for i in props.inputs or []],
            outputs=[o.model_dump() for o in props.outputs or []],
            options=dict(props.options or {}),
        )
    if isinstance(props, CloudConfigProperties):
        return ConfigSpec(UNGROUPED, cloud_config_text(props.cloud_config or {}), [], [], {})
    if isinstance(props, MultipartMimeProperties):
        return ConfigSpec(UNGROUPED, mime_message(props.parts, referenced or {}), [], [], {})
    raise PermanentError(f"{type(props).__name__} is not a software config's properties")


def cloud_config_text(cloud_config: Mapping[str, Any]) -> str:
    """cloud-init's user data for a cloud-config map."""
    return "#cloud-config\n" + yaml.safe_dump(dict(cloud_config), default_flow_style=False)


def mime_message(parts: list[MimePart], referenced: Mapping[uuid.UUID, Any]) -> str:
    """A multipart MIME message of the parts, as Heat builds it: a part naming a config
    (found) holds that config's text; a `multipart` part's own parts are added one by one;
    a text part's subtype defaults to its filename without extension, else plain."""
    subparts: list[MIMEText] = []
    for part in parts:
        named = _as_id(part.config)
        content: Any = referenced.get(named, part.config) if named is not None else part.config
        if not isinstance(content, str):  # a StructuredConfig's map
            content = yaml.safe_dump(content, default_flow_style=False)
        if part.type == "multipart":
            inner = email.message_from_string(content)
            if inner.is_multipart():
                for sub in inner.get_payload():
                    assert isinstance(sub, email.message.Message)
                    payload = sub.get_payload(decode=True)
                    text = payload.decode() if isinstance(payload, bytes) else str(sub.get_payload())
                    subparts.append(_text_part(text, sub.get_content_subtype(), sub.get_filename()))
            continue
        subparts.append(_text_part(content, part.subtype, part.filename))
    return MIMEMultipart(_subparts=subparts).as_string()


def _text_part(text: str, subtype: str | None, filename: str | None) -> MIMEText:
    if not subtype and filename:
        subtype = os.path.splitext(filename)[0]
    message = MIMEText(text, _subtype=subtype) if subtype else MIMEText(text)
    if filename:
        message.add_header("Content-Disposition", "attachment", filename=filename)
    return message


class EngineConfig(ResourceType):
    """A config type: its actions are run by the engine, which stores the config."""

    attributes = {"config": "The config value of the software config."}
    attribute_types = {"config": "String"}

    def _refuse(self) -> PermanentError:
        return PermanentError(
            f"{self.type_name} is run by the engine (it stores the config), not by a worker"
        )

    async def create(self, ctx: ActionContext, props: Properties) -> ActionResult:
        raise self._refuse()

    async def delete(self, ctx: ActionContext, physical_id: str, props: Properties) -> ActionResult:
        raise self._refuse()


class SoftwareConfig(EngineConfig):
    type_name = "OS::Heat::SoftwareConfig"
    description = "A software configuration (script or manifest) stored by the /software_configs API."
    properties = SoftwareConfigProperties
    support_version = "2014.1"


class StructuredConfig(EngineConfig):
    type_name = "OS::Heat::StructuredConfig"
    description = "A software configuration whose config is a map (for tools that take structured data)."
    properties = StructuredConfigProperties
    attribute_types = {"config": "Map"}
    support_version = "2014.1"


class CloudConfig(EngineConfig):
    type_name = "OS::Heat::CloudConfig"
    description = "A cloud-init cloud-config configuration, stored as a software config."
    properties = CloudConfigProperties
    support_version = "2014.1"


class MultipartMime(EngineConfig):
    type_name = "OS::Heat::MultipartMime"
    description = "A multipart MIME message of inline configs and other software configs."
    properties = MultipartMimeProperties
    support_version = "2014.1"
