"""An engine stopping while a traversal's start claims its stack's rows does not wait
for the claim (`traversal.start_reserved`): the claim may wait on locks for long (in the
crash tests, on a dead engine's transaction kept open until that engine is torn down,
which waited for this start: a CI run hung on it), so it is cancelled with the start.

No database: a stand-in transaction whose claim never answers, as a lock never released."""

from __future__ import annotations

import asyncio
import uuid
from typing import cast

import pytest

from services.engine.core.model import Action, StackId, StackRow, Status, TemplateId, TraversalId
from services.engine.definitions import DefinitionCache
from services.engine.effects import Effects
from services.engine.messages import StartTraversal
from services.engine.store.tx import Tx
from services.engine.traversal import start_reserved
from shared.plugins.registry import load_types

TRAVERSAL = TraversalId(uuid.uuid4())
TEMPLATE_ID = TemplateId(uuid.uuid4())
STACK = StackRow(
    StackId(uuid.uuid4()), "p", "s", Action.UPDATE, Status.IN_PROGRESS, "", TRAVERSAL, TEMPLATE_ID, None
)


class ClaimNeverAnswered:
    """The statements a start makes before its claim answer at once; the claim never does."""

    def __init__(self) -> None:
        self.claim_cancelled = asyncio.Event()

    async def stack(self, stack_id: StackId, *, lock: bool = False) -> StackRow:
        return STACK

    async def graph_pending(self, traversal: TraversalId) -> bool:
        return True

    async def announce_claim(self, stack_id: StackId) -> None:
        return None

    async def claim_links(self, stack_id: StackId) -> list[object]:
        try:
            await asyncio.Event().wait()  # a lock nobody releases
        finally:  # only a cancel ends the wait
            self.claim_cancelled.set()
        return []


async def test_a_start_cancelled_while_its_claim_is_sent_cancels_the_claim_and_ends() -> None:
    definitions = DefinitionCache(types=load_types())
    definitions.put_packed(TEMPLATE_ID, b"not read: the start ends before it unpickles")
    rows = ClaimNeverAnswered()
    start = StartTraversal(stack_id=STACK.stack_id, traversal_id=TRAVERSAL)
    task = asyncio.create_task(start_reserved(cast(Tx, rows), start, Effects(), definitions=definitions))
    await asyncio.sleep(0)  # the start runs up to the turn it gives its claim to be sent
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, timeout=30)
    assert rows.claim_cancelled.is_set()
