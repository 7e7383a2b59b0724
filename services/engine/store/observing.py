"""Statements of continuous observation: settings, scheduled rounds, drift.

Where it sits: mixed into `Tx` (one transaction per API call, scheduler
tick or observer report), used by `services.engine.observation`. A stack's
observation row holds the settings from the control API and when its next
round is due; engines take due rows with SKIP LOCKED, so each round is
started by exactly one engine. The `drift` table holds the drift that exists
now; its history is in the events.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from services.engine.core.model import StackId

if TYPE_CHECKING:
    from services.engine.store.tx import Conn


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
        """Take the observations whose round is due (each by one engine) and start it."""
        rows = await self._c.fetch(
            """WITH due AS (
                   SELECT o.stack_id FROM observations o JOIN stacks s USING (stack_id)
                   WHERE o.enabled AND o.next_cycle_at <= now() AND s.deleted_at IS NULL
                   ORDER BY o.next_cycle_at LIMIT $1 FOR UPDATE OF o SKIP LOCKED
               )
               UPDATE observations o SET cycle = o.cycle + 1, last_cycle_at = now(),
                   next_cycle_at = now() + make_interval(secs => o.interval_secs)
               FROM due WHERE o.stack_id = due.stack_id
               RETURNING o.stack_id, o.cycle, o.interval_secs""",
            limit,
        )
        return [Round(r["stack_id"], r["cycle"], r["interval_secs"]) for r in rows]

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
        different from what was stored."""
        changed = await self._c.fetchval(
            """INSERT INTO drift
                   (resource_id, stack_id, resource_name, physical_id, reason, differences, cycle)
               VALUES ($1, $2, $3, $4, $5, $6, $7)
               ON CONFLICT (resource_id) DO UPDATE
                   SET physical_id = $4, reason = $5, differences = $6, cycle = $7, detected_at = now()
                   WHERE drift.reason IS DISTINCT FROM $5 OR drift.differences IS DISTINCT FROM $6
                      OR drift.physical_id IS DISTINCT FROM $4
               RETURNING 1""",
            resource_id,
            stack_id,
            name,
            physical_id,
            reason,
            differences,
            cycle,
        )
        return changed is not None

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
