"""Event retention: each stack keeps its newest events only (Heat's max_events_per_stack).

Where it sits: `EngineService` runs `EventRetention.sweep` every few seconds,
off the check path (events are written with the effects that cause them and
never counted there). A sweep looks at the stacks that got events since the
previous sweep of this engine and deletes, for each, every event but its
newest `per_stack`, so a stack may briefly hold more (until the next sweep),
as Heat's cap is "rough" too. Several engines may sweep the same stacks: a
delete of what is gone already deletes nothing. Deleting old events changes
nothing else: live streams and paging markers work on sequence numbers of
the events that remain, and stall detection reads the newest event.
"""

from __future__ import annotations

import structlog

from services.engine.store.retention import EventPurge

log = structlog.get_logger(__name__)


class EventRetention:
    def __init__(self, purge: EventPurge, *, per_stack: int) -> None:
        """`per_stack` 0: keep every event (nothing is ever purged)."""
        self._purge = purge
        self._per_stack = per_stack
        self._after = 0  # the last event sequence number seen by this engine's sweeps

    async def sweep(self) -> int:
        """Purge the stacks that got events since the last sweep; the events deleted."""
        if self._per_stack <= 0:
            return 0
        stacks, last = await self._purge.touched_since(self._after)
        deleted = 0
        for stack_id in stacks:
            deleted += await self._purge.keep_newest(stack_id, self._per_stack)
        self._after = last
        if deleted:
            log.info("events_purged", stacks=len(stacks), deleted=deleted, keep=self._per_stack)
        return deleted
