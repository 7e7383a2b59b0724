"""What running plugin actions needs, shared by the worker and the observer.

`PluginRuntime` bundles the injected edges (types, allow-listed HTTP, clock,
sleep, randomness); `action_context` builds the `ActionContext` for one job,
whose id is the idempotency key; `validate_properties` turns a job's property
values into the type's model with an error naming the property.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from shared.errors import PermanentError
from shared.plugins.base import ActionContext, Properties, ResourceType
from shared.protocol import ResourceJob


@dataclass(frozen=True)
class PluginRuntime:
    types: Mapping[str, type[ResourceType]]
    http: Any = None  # shared.http_client.HttpGateway
    api_url: str = ""
    endpoints: Mapping[str, str] = field(default_factory=dict)  # name -> base URL (ActionContext)
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    random: Callable[[], float] = field(default=random.random)


def action_context(job: ResourceJob, runtime: PluginRuntime, log: Any) -> ActionContext:
    return ActionContext(
        stack_id=job.stack_id,
        stack_name=job.stack_name,
        project_id=job.project_id,
        resource_name=job.resource_name,
        idempotency_key=job.job_id,
        deadline=job.deadline,
        cancelled=asyncio.Event(),
        log=log,
        http=runtime.http,
        api_url=runtime.api_url,
        clock=runtime.clock,
        endpoints=runtime.endpoints,
    )


def validate_properties(schema: type[Properties], values: Mapping[str, Any], what: str) -> Properties:
    try:
        return schema.model_validate(dict(values))
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise PermanentError(f"{what}.{where}: {err['msg']}" if where else f"{what}: {err['msg']}") from exc
