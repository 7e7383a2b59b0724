"""Statements of continuous observation: settings, scheduled rounds, drift, healing.

Where it sits: mixed into `Tx` (one transaction per API call, scheduler
tick or observer report), used by `services.engine.observation` and
`services.engine.healing`. A stack's observation row holds the settings from
the control API, when its next round is due, the current round's bookkeeping
(looks sent, answers received, deadline, whether it was judged as a whole)
and the state of healing (the last heal's traversal, failed attempts, the
earliest retry). Engines take due rows with SKIP LOCKED, and close a round
with a compare-and-set, so each round is started and closed by exactly one
engine. The `drift` table holds the drift that exists now, with the round
that last saw it; its history is in the events.

Lock order: a transaction that locks an observation row takes it before any
resource or stack row (closing a round, then healing); reports lock resource
rows and count themselves towards the round in a transaction of their own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from services.engine.core.model import ResourceId, StackId, TraversalId

if TYPE_CHECKING:
    from services.engine.store.driver import Conn


@dataclass(frozen=True)
class ObservationRow:
    enabled: bool
    interval: float
    heal: bool
    cycle: int
    last_cycle_at: datetime | None


@dataclass(frozen=True)
class Round:
    """A round of observation just started: look at every settled resource of the stack."""

    stack_id: StackId
    cycle: int
    interval: float


@dataclass(frozen=True)
class ClosedRound:
    """A round just closed: the stack's settings and its healing state, at `now` (the
    database's clock, in seconds since the epoch, so every engine reads the same)."""

    enabled: bool
    heal: bool
    heal_traversal: TraversalId | None
    heal_attempts: int
    heal_not_before: float | None
    now: float


@dataclass(frozen=True)
class SeenDriftRow:
    """A drift record as healing reads it: whose, what, and the round that last saw it."""

    resource_id: ResourceId
    physical_id: str | None
    reason: str
    differences: Mapping[str, Any]
    cycle: int


@dataclass(frozen=True)
class DriftRecord:
    resource_name: str
    physical_id: str | None
    reason: str
    differences: Mapping[str, Any]


class ObservationStatements:
    _c: Conn

    async def set_observation(self, stack_id: StackId, *, enabled: bool, interval: float, heal: bool) -> None:
        """Start (first round due now) or stop observing the stack."""
        await self._c.execute(
            """INSERT INTO observations (stack_id, enabled, interval_secs, heal)
               VALUES ($1, $2, $3, $4)
               ON CONFLICT (stack_id) DO UPDATE SET enabled = $2, interval_secs = $3, heal = $4,
                   next_cycle_at = now(), updated_at = now()""",
            stack_id,
            enabled,
            interval,
            heal,
        )

    async def observation(self, stack_id: StackId) -> ObservationRow | None:
        r = await self._c.fetchrow(
            """SELECT enabled, interval_secs, heal, cycle, last_cycle_at
               FROM observations WHERE stack_id = $1""",
            stack_id,
        )
        if r is None:
            return None
        return ObservationRow(r["enabled"], r["interval_secs"], r["heal"], r["cycle"], r["last_cycle_at"])

    async def start_due_rounds(self, *, limit: int = 50) -> list[Round]:
        """Take the observations whose round is due (each by one engine) and start it.
        A round is not started while the previous one is still open: it waits for that
        round's answers (or deadline), so rounds never overlap."""
        rows = await self._c.fetch(
            """WITH due AS (
                   SELECT o.stack_id FROM observations o JOIN stacks s USING (stack_id)
                   WHERE o.enabled AND o.next_cycle_at <= now() AND s.deleted_at IS NULL
                     AND o.round_closed
                   ORDER BY o.next_cycle_at LIMIT $1 FOR UPDATE OF o SKIP LOCKED
               )
               UPDATE observations o SET cycle = o.cycle + 1, last_cycle_at = now(),
                   next_cycle_at = now() + make_interval(secs => o.interval_secs)
               FROM due WHERE o.stack_id = due.stack_id
               RETURNING o.stack_id, o.cycle, o.interval_secs""",
            limit,
        )
        return [Round(r["stack_id"], r["cycle"], r["interval_secs"]) for r in rows]

    async def round_sent(self, stack_id: StackId, *, looks: int, deadline_secs: float) -> None:
        """The round just started sent `looks` looks: it closes once each is answered, or
        `deadline_secs` from now (an observer may drop a look)."""
        await self._c.execute(
            """UPDATE observations SET round_looks = $2, round_reports = 0, round_closed = false,
                   round_deadline = now() + make_interval(secs => $3)
               WHERE stack_id = $1""",
            stack_id,
            looks,
            deadline_secs,
        )

    async def count_report(self, stack_id: StackId, cycle: int) -> None:
        """One more look of round `cycle` was answered (nothing if that round is over)."""
        await self._c.execute(
            """UPDATE observations SET round_reports = round_reports + 1
               WHERE stack_id = $1 AND cycle = $2 AND NOT round_closed""",
            stack_id,
            cycle,
        )

    async def trigger_rounds(self, stack_ids: list[StackId], *, gap: float) -> None:
        """Have the next round of each stack start now (a provider notified a change), or
        `gap` seconds after the last one started if that is later; a round still open
        finishes first."""
        await self._c.execute(
            """UPDATE observations
               SET next_cycle_at = LEAST(next_cycle_at,
                   GREATEST(now(), last_cycle_at + make_interval(secs => $2)))
               WHERE stack_id = ANY($1::uuid[]) AND enabled AND next_cycle_at > now()""",
            stack_ids,
            gap,
        )

    async def expire_open_rounds(self) -> int:
        """Give up waiting on the looks of every open round (they died with an in-process
        bus): each is closed, and judged, at the next tick. The number of rounds."""
        status = await self._c.execute(
            "UPDATE observations SET round_deadline = now() WHERE NOT round_closed AND round_deadline > now()"
        )
        return int(status.split()[-1])

    async def rounds_to_close(self, *, limit: int = 50) -> list[tuple[StackId, int]]:
        """(stack, cycle) of each open round whose looks were all answered or whose
        deadline passed."""
        rows = await self._c.fetch(
            """SELECT stack_id, cycle FROM observations
               WHERE NOT round_closed AND (round_reports >= round_looks OR round_deadline <= now())
               ORDER BY round_deadline LIMIT $1""",
            limit,
        )
        return [(r["stack_id"], r["cycle"]) for r in rows]

    async def close_round(self, stack_id: StackId, cycle: int) -> ClosedRound | None:
        """Close round `cycle` of the stack if it is still open and complete (or overdue);
        None if another engine closed it, or it is not ready. Locks the observation row."""
        r = await self._c.fetchrow(
            """UPDATE observations SET round_closed = true
               WHERE stack_id = $1 AND cycle = $2 AND NOT round_closed
                 AND (round_reports >= round_looks OR round_deadline <= now())
               RETURNING enabled, heal, heal_traversal, heal_attempts,
                   extract(epoch FROM heal_not_before)::float8 AS not_before,
                   extract(epoch FROM now())::float8 AS now""",
            stack_id,
            cycle,
        )
        if r is None:
            return None
        return ClosedRound(
            r["enabled"], r["heal"], r["heal_traversal"], r["heal_attempts"], r["not_before"], r["now"]
        )

    async def heal_started(self, stack_id: StackId, traversal: TraversalId, *, attempts: int) -> None:
        await self._c.execute(
            """UPDATE observations SET heal_traversal = $2, heal_attempts = $3, heal_not_before = NULL
               WHERE stack_id = $1""",
            stack_id,
            traversal,
            attempts,
        )

    async def heal_waits(self, stack_id: StackId, *, until: float) -> None:
        """The last heal failed: retry it no earlier than `until` (seconds since the epoch)."""
        await self._c.execute(
            "UPDATE observations SET heal_not_before = to_timestamp($2) WHERE stack_id = $1",
            stack_id,
            until,
        )

    async def seen_drift(self, stack_id: StackId) -> list[SeenDriftRow]:
        rows = await self._c.fetch(
            """SELECT resource_id, physical_id, reason, differences, cycle FROM drift
               WHERE stack_id = $1 ORDER BY resource_id""",
            stack_id,
        )
        return [
            SeenDriftRow(r["resource_id"], r["physical_id"], r["reason"], r["differences"], r["cycle"])
            for r in rows
        ]

    async def record_drift(
        self,
        resource_id: int,
        stack_id: StackId,
        name: str,
        physical_id: str,
        reason: str,
        differences: Any,
        *,
        cycle: int,
    ) -> bool:
        """Store the drift of a resource seen in round `cycle`; True when it is new or
        different from what was stored (`detected_at` says since when it is as it is)."""
        changed = await self._c.fetchval(
            """INSERT INTO drift
                   (resource_id, stack_id, resource_name, physical_id, reason, differences, cycle)
               VALUES ($1, $2, $3, $4, $5, $6, $7)
               ON CONFLICT (resource_id) DO UPDATE
                   SET physical_id = $4, reason = $5, differences = $6, cycle = $7,
                       detected_at = CASE
                           WHEN (drift.reason, drift.differences, drift.physical_id)
                                IS DISTINCT FROM ($5, $6::jsonb, $4) THEN now()
                           ELSE drift.detected_at END
               RETURNING detected_at = now()""",
            resource_id,
            stack_id,
            name,
            physical_id,
            reason,
            differences,
            cycle,
        )
        return bool(changed)

    async def clear_drift(self, resource_id: int) -> bool:
        """Forget the drift of a resource now in line; True if there was some."""
        gone = await self._c.fetchval("DELETE FROM drift WHERE resource_id = $1 RETURNING 1", resource_id)
        return gone is not None

    async def drift(self, stack_id: StackId) -> list[DriftRecord]:
        rows = await self._c.fetch(
            """SELECT resource_name, physical_id, reason, differences FROM drift
               WHERE stack_id = $1 ORDER BY resource_name""",
            stack_id,
        )
        return [
            DriftRecord(r["resource_name"], r["physical_id"], r["reason"], r["differences"]) for r in rows
        ]

    async def observed_stacks_holding(self, physical_id: str) -> list[StackId]:
        """Stacks under observation with a current resource of that physical id."""
        rows = await self._c.fetch(
            """SELECT DISTINCT r.stack_id FROM resources r JOIN observations o USING (stack_id)
               WHERE r.physical_id = $1 AND r.replaced_by IS NULL AND o.enabled""",
            physical_id,
        )
        return [r["stack_id"] for r in rows]
