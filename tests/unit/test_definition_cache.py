"""The engine's definition cache builds each template's definition once, even
when many checks miss the cache at the same moment. No database: a stand-in
transaction serves the template row."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, cast

from services.engine.core.model import Action, StackId, StackRow, Status, TemplateId
from services.engine.definitions import DefinitionCache
from services.engine.store.templates import TemplateRecord
from services.engine.store.tx import Tx
from shared.plugins.registry import load_types

TEMPLATE_ID = TemplateId(uuid.uuid4())
STACK = StackRow(
    StackId(uuid.uuid4()), "p", "s", Action.CREATE, Status.IN_PROGRESS, "", None, TEMPLATE_ID, None
)
TEMPLATE = {
    "heat_template_version": "2016-10-14",
    "resources": {f"r{i}": {"type": "OS::Heat::None"} for i in range(50)},
}


class SlowTemplateRows:
    """Answers `template()` after yielding to the loop, counting the reads."""

    def __init__(self) -> None:
        self.reads = 0

    async def template(self, template_id: TemplateId) -> TemplateRecord | None:
        self.reads += 1
        await asyncio.sleep(0.01)
        return TemplateRecord(template_id, TEMPLATE, {}, {}, {})


async def test_checks_missing_the_cache_together_read_and_parse_the_template_once() -> None:
    cache = DefinitionCache(types=load_types())
    rows = SlowTemplateRows()
    tx = cast(Tx, rows)
    definitions: list[Any] = await asyncio.gather(*(cache.get(tx, STACK, TEMPLATE_ID) for _ in range(20)))
    assert rows.reads == 1
    assert all(d is definitions[0] for d in definitions), "one definition shared by every check"
    assert len(definitions[0].resources) == 50
    await cache.get(tx, STACK, TEMPLATE_ID)
    assert rows.reads == 1, "later checks hit the cache"
