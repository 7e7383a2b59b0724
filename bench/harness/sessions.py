"""What the services' database sessions are doing while a phase runs, sampled.

Where it sits: `bench/engine_profile.py` samples during each phase it counts.
Every `INTERVAL` seconds `pg_stat_activity` is read for the sessions the
services opened on the scratch database (their `application_name` starts with
`converge`); each sample counts, by what a session is doing, how many do it:

- **waiting for a lock** (`wait_event_type` Lock): a transaction held up by
  another's row (or advisory) lock until that one ends;
- **idle in transaction**: the service is working (or waiting for its turn of
  the event loop) between two statements of one transaction;
- **running**: a statement executing, or waiting for I/O (a commit's WAL flush).

The means over the samples are sessions, as a load average is processes: 0.2
waiting for a lock is one session held up a fifth of the time. Each figure also
names the statement seen most often in that state (its first words), so a
profile says which lock is waited for and where the services spend their
transactions.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import asyncpg

INTERVAL = 0.02  # seconds between samples (more often, and the sampling itself slows a run)
WORDS = 6  # of a statement, to name it

SESSIONS = """SELECT state, wait_event_type, query FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid()
      AND application_name LIKE 'converge%' AND state IN ('active', 'idle in transaction')"""

STATES = ("waiting for a lock", "idle in transaction", "running")


def state_of(state: str, wait_event_type: str | None) -> str:
    """Which of `STATES` a session of `pg_stat_activity` is in (only those two states are read)."""
    if state == "idle in transaction":
        return "idle in transaction"
    return "waiting for a lock" if wait_event_type == "Lock" else "running"


def statement_name(query: str) -> str:
    """The statement's first `WORDS` words: enough to tell the engine's statements apart."""
    return " ".join(query.split()[:WORDS])


@dataclass
class Sessions:
    """What the samples saw: in each state, how many sessions in all and by statement."""

    samples: int = 0
    seen: collections.Counter[str] = field(default_factory=collections.Counter)
    statements: dict[str, collections.Counter[str]] = field(
        default_factory=lambda: {s: collections.Counter() for s in STATES}
    )

    def add(self, sessions: list[tuple[str, str | None, str]]) -> None:
        """One sample: (state, wait_event_type, query) of each session seen."""
        self.samples += 1
        for state, wait, query in sessions:
            what = state_of(state, wait)
            self.seen[what] += 1
            self.statements[what][statement_name(query)] += 1

    def mean(self, state: str) -> float:
        return self.seen[state] / self.samples if self.samples else 0.0

    def most_seen(self, state: str) -> tuple[str, float] | None:
        """The statement most often seen in `state`, and its share of that state's sightings."""
        top = self.statements[state].most_common(1)
        return (top[0][0], top[0][1] / self.seen[state]) if top else None


@contextlib.asynccontextmanager
async def sampled(database_url: str) -> AsyncIterator[Sessions]:
    """Sample the services' sessions on `database_url` until the block ends."""
    found = Sessions()
    conn = await asyncpg.connect(database_url)
    stop = asyncio.Event()

    async def sample() -> None:
        while not stop.is_set():
            found.add([(r["state"], r["wait_event_type"], r["query"]) for r in await conn.fetch(SESSIONS)])
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), INTERVAL)

    task = asyncio.create_task(sample())
    try:
        yield found
    finally:
        stop.set()
        await task
        await conn.close()
