"""The sandbox cloud's state on disk: a SQLite file (WAL), each change durable before
the answer that reports it.

Where it sits: `SandboxService` (service.py) hands what each request changed
to `StateFile.save` — the records of the resources it touched (records.py),
the idempotency key it learnt, the cloud's counters, the alarms it made or
deleted (alarms.py; the servers' loads are not kept) — and the HTTP layer
(app.py) awaits `durable()` before it answers, so no answer reports what a
crash could undo; a crash before the answer loses only a change nobody was
told about (a client asks again with its Idempotency-Key). Saves are written
in the order they were made by one writer thread, all those waiting together
in one transaction (one sync to disk), so the event loop never waits on the
disk and a burst of requests costs one sync. `load` reads at start-up what
`Cloud.restore` needs. (A build that finished after the last write finishes
again when restored: its `ready_at` is kept.)

The file: CONVERGE_SANDBOX_STATE, or `<data_dir>/sandbox.sqlite3` under
`converge up`; without one the cloud lives in memory only.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from services.sandbox.model import IDEMPOTENCY_KEYS_KEPT, KeyRecord, Resource
from services.sandbox.records import resource_from_record
from services.sandbox.specs import Kind
from shared.errors import PermanentError, TransientError
from shared.tasks import log_task_failure

log = structlog.get_logger(__name__)

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS resources (id TEXT PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS idempotency_keys (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL, resource_id TEXT NOT NULL,
    UNIQUE (kind, key));
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS alarms (id TEXT PRIMARY KEY, record TEXT NOT NULL);
"""


class SandboxStateUnavailable(TransientError):
    """The sandbox could not write its state; the change is not durable yet."""


class SandboxStateInvalid(PermanentError):
    """The state file cannot be used (not a sandbox state, or from a newer version)."""


@dataclass(frozen=True)
class StateWrite:
    """What one request changed: resource records by id (None: deleted), the key it
    learnt, and the cloud's counters after it."""

    resources: Mapping[str, Mapping[str, Any] | None]
    key: KeyRecord | None = None
    counters: Mapping[str, int] = field(default_factory=dict)
    alarms: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)  # by id; None: deleted


@dataclass(frozen=True)
class SavedState:
    resources: list[Resource]
    keys: list[KeyRecord]  # oldest first
    counters: dict[str, int]
    alarms: list[dict[str, Any]] = field(default_factory=list)  # alarms.py records


class StateFile:
    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-state")
        self._pending: list[StateWrite] = []
        self._submitted = 0  # saves made
        self._written = 0  # saves on disk
        self._failed = False  # the last write failed; a later save or `durable` tries again
        self._changed = asyncio.Condition()
        self._writer: asyncio.Task[None] | None = None
        self._closed = False

    @classmethod
    def open(cls, path: Path) -> StateFile:
        """Open (or create) the file; SandboxStateInvalid names the file when it is not one."""
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")  # a commit survives a power cut, not only a crash
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise SandboxStateInvalid(
                    f"{path} holds sandbox state of version {version}, newer than this sandbox's "
                    f"({SCHEMA_VERSION})"
                )
            conn.executescript(_SCHEMA)
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except sqlite3.Error as exc:
            raise SandboxStateInvalid(f"cannot use {path} as the sandbox's state: {exc}") from exc
        return cls(conn, path)

    def load(self) -> SavedState:
        """What the file holds (at start-up, before any save)."""
        try:
            resources = [
                resource_from_record(json.loads(text))
                for (text,) in self._conn.execute("SELECT record FROM resources")
            ]
            keys = [
                KeyRecord(Kind(kind), key, fingerprint, resource_id)
                for kind, key, fingerprint, resource_id in self._conn.execute(
                    "SELECT kind, key, fingerprint, resource_id FROM idempotency_keys ORDER BY seq"
                )
            ]
            counters = dict(self._conn.execute("SELECT name, value FROM counters"))
            alarms = [json.loads(text) for (text,) in self._conn.execute("SELECT record FROM alarms")]
        except (sqlite3.Error, ValueError, KeyError, TypeError) as exc:
            raise SandboxStateInvalid(f"cannot read the sandbox's state from {self.path}: {exc}") from exc
        return SavedState(resources, keys, counters, alarms)

    # -- writing -------------------------------------------------------------------

    def save(self, write: StateWrite) -> None:
        """Queue a change for the writer (in order); `durable` waits until it is on disk.
        After `close` (shutting down: only a build finishing, which follows from its
        `ready_at` anyway) nothing is written."""
        if self._closed:
            return
        self._pending.append(write)
        self._submitted += 1
        self._kick()

    async def durable(self) -> None:
        """Return once every change saved so far is on disk; SandboxStateUnavailable
        if writing failed (it is tried again later)."""
        target = self._submitted
        if self._written >= target:
            return
        self._kick()
        async with self._changed:
            await self._changed.wait_for(lambda: self._written >= target or self._failed)
        if self._written < target:
            raise SandboxStateUnavailable(f"the sandbox could not save its state to {self.path}")

    def _kick(self) -> None:
        if self._writer is None or self._writer.done():
            self._failed = False
            self._writer = asyncio.get_running_loop().create_task(self._write_all(), name="sandbox-state")
            self._writer.add_done_callback(log_task_failure)

    async def _write_all(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                batch = list(self._pending)
                await loop.run_in_executor(self._executor, self._apply, batch)
                del self._pending[: len(batch)]
                self._written += len(batch)
                async with self._changed:
                    self._changed.notify_all()
        except (sqlite3.Error, OSError) as exc:
            log.error("sandbox_state_write_failed", path=str(self.path), error=str(exc))
        finally:  # whatever stopped the writer, nobody waits for it in vain
            self._failed = bool(self._pending)
            async with self._changed:
                self._changed.notify_all()

    def _apply(self, batch: list[StateWrite]) -> None:
        """One transaction for the whole batch (in the writer thread)."""
        c = self._conn
        c.execute("BEGIN IMMEDIATE")
        try:
            counters: dict[str, int] = {}
            for write in batch:
                for resource_id, record in write.resources.items():
                    if record is None:
                        c.execute("DELETE FROM resources WHERE id = ?", (resource_id,))
                    else:
                        c.execute(
                            "INSERT OR REPLACE INTO resources (id, record) VALUES (?, ?)",
                            (resource_id, json.dumps(record, separators=(",", ":"))),
                        )
                if write.key is not None:
                    k = write.key
                    c.execute(
                        """INSERT OR REPLACE INTO idempotency_keys (kind, key, fingerprint, resource_id)
                           VALUES (?, ?, ?, ?)""",
                        (k.kind.value, k.key, k.fingerprint, k.resource_id),
                    )
                counters.update(write.counters)
                for alarm_id, alarm in write.alarms.items():
                    if alarm is None:
                        c.execute("DELETE FROM alarms WHERE id = ?", (alarm_id,))
                    else:
                        c.execute(
                            "INSERT OR REPLACE INTO alarms (id, record) VALUES (?, ?)",
                            (alarm_id, json.dumps(alarm, separators=(",", ":"))),
                        )
            c.executemany("INSERT OR REPLACE INTO counters (name, value) VALUES (?, ?)", counters.items())
            if any(write.key is not None for write in batch):
                c.execute(
                    """DELETE FROM idempotency_keys
                       WHERE seq <= (SELECT max(seq) FROM idempotency_keys) - ?""",
                    (IDEMPOTENCY_KEYS_KEPT,),
                )
            c.execute("COMMIT")
        finally:
            if c.in_transaction:
                c.execute("ROLLBACK")

    async def close(self) -> None:
        """Write what is queued, then close the file."""
        try:
            await self.durable()
        except SandboxStateUnavailable as exc:
            log.error("sandbox_state_lost_on_close", error=str(exc), unsaved=len(self._pending))
        self._closed = True
        if self._writer is not None:
            await asyncio.gather(self._writer, return_exceptions=True)
        await asyncio.get_running_loop().run_in_executor(self._executor, self._conn.close)
        self._executor.shutdown(wait=True)
