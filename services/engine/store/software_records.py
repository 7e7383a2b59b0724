"""The records of software configs and deployments, as their statements read and change them.

Where it sits: the statements of `software_configs.py` and
`software_deployments.py` (mixed into `Tx`) select these columns and return
these frozen records; the API (`services.engine.api.software_configs`,
`services.engine.api.software_deployments`), the engine's run of the config
and deployment resource types (`services.engine.configs`,
`services.engine.deployments`) and the agent's signals
(`services.engine.signals`) read them. A `DeploymentChange` is what a
deployment's update writes: only the fields it sets.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from services.engine.store.driver import Record


@dataclass(frozen=True)
class ConfigRecord:
    config_id: uuid.UUID
    project_id: str
    name: str
    group: str
    config: Mapping[str, Any]  # config, inputs, outputs, options
    created_at: datetime


@dataclass(frozen=True)
class DeploymentRecord:
    deployment_id: uuid.UUID
    project_id: str
    server_id: str
    config_id: uuid.UUID
    input_values: Mapping[str, Any]
    output_values: Mapping[str, Any]
    action: str
    status: str
    status_reason: str
    stack_id: uuid.UUID | None
    resource_name: str | None
    created_at: datetime
    updated_at: datetime | None


@dataclass(frozen=True, kw_only=True)
class DeploymentChange:
    """The columns of a deployment an update writes: those not None (none of them is
    ever cleared)."""

    config_id: uuid.UUID | None = None
    input_values: Mapping[str, Any] | None = None
    output_values: Mapping[str, Any] | None = None
    action: str | None = None
    status: str | None = None
    status_reason: str | None = None

    def written(self) -> dict[str, Any]:
        """The fields set, by column name, in the record's field order."""
        out: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None:
                out[field.name] = dict(value) if field.name.endswith("_values") else value
        return out

    @property
    def empty(self) -> bool:
        return not self.written()


CONFIG_COLUMNS: Final = 'config_id, project_id, name, "group" AS group, config, created_at'
DEPLOYMENT_COLUMNS: Final = """deployment_id, project_id, server_id, config_id, input_values, output_values,
    action, status, status_reason, stack_id, resource_name, created_at, updated_at"""


def config_record(r: Record) -> ConfigRecord:
    return ConfigRecord(**dict(r))


def deployment_record(r: Record) -> DeploymentRecord:
    return DeploymentRecord(**dict(r))
