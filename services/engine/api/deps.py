"""What the API handlers need, built once at start-up and passed in."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from services.engine.core.model import StackId, Status
from services.engine.definitions import DefinitionCache
from services.engine.jobs import reference_data
from services.engine.observation import Observing
from services.engine.operations import Operations
from services.engine.signals import Signals
from services.engine.store import Store
from services.engine.store.queries import Queries, StackView
from services.engine.template import (
    DEFAULT_LIMITS,
    OutputValue,
    ResourceData,
    StackDefinition,
    TemplateLimits,
    resolve_outputs,
)
from services.engine.template_pool import INLINE, TemplateRunner
from shared.plugins import ResourceType


@dataclass(frozen=True)
class ApiDeps:
    operations: Operations
    queries: Queries
    store: Store
    definitions: DefinitionCache
    types: Mapping[str, type[ResourceType]]
    signals: Signals
    observing: Observing
    limits: TemplateLimits = DEFAULT_LIMITS
    templates: TemplateRunner = INLINE  # where request templates are parsed and evaluated

    async def current_definition(self, stack: StackView) -> StackDefinition | None:
        """The stack's current definition (cached by template), or None before it has one."""
        async with self.store.transaction() as tx:
            row = await tx.stack(StackId(stack.stack_id))
            if row is None or row.current_template_id is None:
                return None
            return await self.definitions.get(tx, row, row.current_template_id)

    async def definition_and_outputs(
        self, stack: StackView
    ) -> tuple[StackDefinition | None, dict[str, OutputValue]]:
        """The stack's current definition and its outputs, resolved from the current rows now."""
        async with self.store.transaction() as tx:
            row = await tx.stack(StackId(stack.stack_id))
            if row is None or row.current_template_id is None:
                return None, {}
            definition = await self.definitions.get(tx, row, row.current_template_id)
            rows = await tx.current_resources(row.stack_id, definition.resources)
        data: dict[str, ResourceData] = {}
        for name, r in rows.items():
            if r.status is Status.FAILED:
                data[name] = ResourceData(None, error=r.status_reason or "the resource failed")
            elif r.physical_id is not None:
                data[name] = reference_data(r, self.types)
        return definition, resolve_outputs(definition, data)
