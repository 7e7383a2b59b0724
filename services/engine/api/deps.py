"""What the API handlers need, built once at start-up and passed in."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

from services.engine.api.masking import SecretsCache
from services.engine.configs import DEFAULT_CONFIG_BYTES
from services.engine.core.model import StackId, TemplateId
from services.engine.definitions import DefinitionCache
from services.engine.jobs import output_data
from services.engine.observation import Observing
from services.engine.operations import Operations
from services.engine.resolving import output_values
from services.engine.signals import Signals
from services.engine.snapshots import Snapshots
from services.engine.store import Store
from services.engine.store.queries import Queries, StackView
from services.engine.template import (
    DEFAULT_CONSTRAINTS,
    DEFAULT_LIMITS,
    CustomConstraints,
    OutputValue,
    StackDefinition,
    TemplateLimits,
)
from services.engine.template_pool import INLINE, TemplateRunner
from shared.plugins import ResourceType


@dataclass(frozen=True)
class ApiLimits:
    """What one request may cost, and what one stack may keep (CONVERGE_MAX_* settings,
    read once in main)."""

    signal_bytes: int = 64 * 1024  # a signal's body
    signals_per_handle: int = 100  # signals one wait-condition handle keeps
    signal_reason_chars: int = 255  # a signal's reason, as events store it (Heat's column width)
    streams_per_token: int = 10  # live event streams open at once per token (per engine)
    snapshots_per_stack: int = 32  # snapshots one stack may keep (Heat's max_snapshots_per_stack)
    events_per_stack: int = 1000  # events a stack keeps, older ones purged (0: all; Heat's default)
    config_bytes: int = DEFAULT_CONFIG_BYTES  # a software config's text (API and config resources)


DEFAULT_API_LIMITS = ApiLimits()


#: Resource reads of one project in progress at once (at most half the pool).
READS_PER_PROJECT = 2


class ReadSlots:
    """At most `per_key` resource reads of one project in progress at once: a show, a
    page, or a whole list (its statements and the formatting and writing of what they
    read). One project's many or large reads queue behind each other instead of taking
    the pool, the memory or the event loop from the other projects."""

    def __init__(self, per_key: int) -> None:
        self._per_key = per_key
        self._slots: dict[str, asyncio.Semaphore] = {}
        self._users: dict[str, int] = {}

    @contextlib.asynccontextmanager
    async def slot(self, key: str) -> AsyncIterator[None]:
        semaphore = self._slots.setdefault(key, asyncio.Semaphore(self._per_key))
        self._users[key] = self._users.get(key, 0) + 1
        try:
            async with semaphore:
                yield
        finally:
            self._users[key] -= 1
            if not self._users[key]:  # nobody holds or waits: forget the project
                del self._users[key], self._slots[key]


@dataclass(frozen=True)
class ApiDeps:
    operations: Operations
    queries: Queries
    store: Store
    definitions: DefinitionCache
    types: Mapping[str, type[ResourceType]]
    signals: Signals
    observing: Observing
    secrets: SecretsCache
    reads: ReadSlots
    snapshots: Snapshots
    limits: TemplateLimits = DEFAULT_LIMITS
    templates: TemplateRunner = INLINE  # where request templates are parsed and evaluated
    api_limits: ApiLimits = DEFAULT_API_LIMITS
    constraints: CustomConstraints = DEFAULT_CONSTRAINTS  # custom constraints of parameters

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
        """The stack's current definition and its outputs, resolved from the current rows
        now: only those of the resources the outputs refer to (a stack show must not read,
        decode and ship to the template pool every row of a 10,000-resource stack). When
        this engine holds the definition of the template `stack` names and no output
        refers to a resource, no statement at all: a show while the stack converges
        answers without waiting for the database again."""
        if stack.current_template_id is not None:
            held = self.definitions.at_hand(TemplateId(stack.current_template_id))
            if held is not None and not any(output.requires for output in held.outputs.values()):
                return held, await output_values(self.templates, held, {})
        async with self.store.transaction() as tx:
            row = await tx.stack(StackId(stack.stack_id))
            if row is None or row.current_template_id is None:
                return None, {}
            definition = await self.definitions.get(tx, row, row.current_template_id)
            referred = {name for output in definition.outputs.values() for name in output.requires}
            rows = await tx.current_resources(row.stack_id, referred) if referred else {}
        data = output_data(rows, self.types)
        return definition, await output_values(self.templates, definition, data)
