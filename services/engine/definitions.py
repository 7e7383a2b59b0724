"""Parsed stack definitions, cached per template id (templates never change).

Checking a resource needs its stack's `StackDefinition`; parsing it is
O(stack size), so each engine parses a template once and keeps it (LRU). A
miss is parsed in the template pool (`goals.load_definition`), off the event
loop; a hit costs nothing but the lookup.
"""

from __future__ import annotations

import asyncio
import pickle
from collections import OrderedDict
from collections.abc import Mapping

from services.engine.collector import COLLECTOR
from services.engine.core.model import StackRow, TemplateId
from services.engine.goals import Goal, load_definition
from services.engine.store.templates import TemplateRecord
from services.engine.store.tx import Tx
from services.engine.template import (
    DEFAULT_LIMITS,
    StackDefinition,
    StackIdentity,
    TemplateLimits,
)
from services.engine.template_pool import INLINE, TemplateRunner
from shared.errors import PermanentError
from shared.plugins import ResourceType


def identity_of(stack: StackRow) -> StackIdentity:
    return StackIdentity(stack_name=stack.name, stack_id=str(stack.stack_id), project_id=stack.project_id)


def stored_goal(record: TemplateRecord) -> Goal:
    return Goal(record.template, record.environment, record.parameters, record.files, record.source)


class DefinitionCache:
    def __init__(
        self,
        *,
        types: Mapping[str, type[ResourceType]],
        limits: TemplateLimits = DEFAULT_LIMITS,
        size: int = 64,
        templates: TemplateRunner = INLINE,
    ) -> None:
        self._types = types
        self._limits = limits
        self._templates = templates
        self._size = size
        self._cache: OrderedDict[TemplateId, StackDefinition] = OrderedDict()
        self._packed: dict[TemplateId, bytes] = {}  # definitions put pickled, not asked for yet
        self._loading: dict[TemplateId, asyncio.Lock] = {}

    def put_packed(self, template_id: TemplateId, packed: bytes) -> None:
        """`put` a definition still pickled (`goals.prepare_update`): unpickled when first asked for."""
        self._packed[template_id] = packed
        while len(self._packed) > self._size:
            self._packed.pop(next(iter(self._packed)))

    def put(self, template_id: TemplateId, definition: StackDefinition) -> None:
        self._cache[template_id] = definition
        self._cache.move_to_end(template_id)
        while len(self._cache) > self._size:
            self._cache.popitem(last=False)

    async def get(self, tx: Tx, stack: StackRow, template_id: TemplateId) -> StackDefinition:
        """The definition of `template_id`, built once: checks that miss the cache
        together wait for the first one's fetch and parse instead of each holding a
        copy of a large template (a plain read of the template row: waiting here
        holds up no lock another check needs)."""
        cached = self._cached(template_id)
        if cached is not None:
            return cached
        lock = self._loading.setdefault(template_id, asyncio.Lock())
        try:
            async with lock:
                cached = self._cached(template_id)
                if cached is not None:
                    return cached
                record = await tx.template(template_id)
                if record is None:
                    raise PermanentError(f"template {template_id} of stack {stack.stack_id} is missing")
                definition = await self._templates.run(
                    load_definition, stored_goal(record), identity_of(stack), self._types, self._limits
                )
                self.put(template_id, definition)
                return definition
        finally:
            if not lock.locked() and self._loading.get(template_id) is lock:
                del self._loading[template_id]

    def is_packed(self, template_id: TemplateId) -> bool:
        """Whether the definition was `put_packed` here and not asked for yet."""
        return template_id in self._packed

    def at_hand(self, template_id: TemplateId) -> StackDefinition | None:
        """The definition if this engine holds it (parsed, or packed: unpickled now), with
        no statement and no wait; None if `get` would have to read and parse it."""
        return self._cached(template_id)

    def _cached(self, template_id: TemplateId) -> StackDefinition | None:
        packed = self._packed.pop(template_id, None)
        if packed is not None:
            with COLLECTOR.paused():  # a large definition: every object it makes stays
                self.put(template_id, pickle.loads(packed))  # made by this engine's template pool
        cached = self._cache.get(template_id)
        if cached is not None:
            self._cache.move_to_end(template_id)
        return cached
