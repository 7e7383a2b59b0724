"""Embedded PostgreSQL (the `pgserver` wheel) for `converge up` and the
engine's no-URL default. Data lives under `<data_dir>/postgres` and survives
restarts; the server is stopped (not wiped) when the process exits.

pgserver shares one server between the processes using a data dir: each
adds its pid to `<pgdata>/.handle_pids.json`, and the last one to leave
stops the server. A process killed with SIGKILL never leaves, so its pid
stayed listed for good and no later process was ever the last: the server
outlived the crash and every later clean stop. Before attaching, we forget
the pids of processes that no longer exist (under pgserver's own lock), so
the next `up` adopts the server a crash left running and its clean stop
stops it. A pid the kernel has since given to another process keeps the
server running (as before): the safe side.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from shared.errors import StoreUnavailable

log = structlog.get_logger(__name__)

#: pgserver's list of the pids using a data dir's server.
HANDLE_PIDS = ".handle_pids.json"


@dataclass
class EmbeddedPostgres:
    url: str
    _server: Any

    async def stop(self) -> None:
        await asyncio.to_thread(self._server.cleanup)


async def start_embedded(data_dir: Path) -> EmbeddedPostgres:
    """Start (or reattach to) the embedded server; return its URL."""
    import pgserver  # heavy import, only where the embedded default is used

    pgdata = (data_dir / "postgres").resolve()
    pgdata.mkdir(parents=True, exist_ok=True)
    try:
        gone = await asyncio.to_thread(_forget_gone_users, pgdata, pgserver.PostgresServer._lock)
        if gone:
            log.info("embedded_postgres_adopted", data_dir=str(data_dir), crashed_pids=gone)
        server = await asyncio.to_thread(pgserver.get_server, pgdata, cleanup_mode="stop")
    except Exception as exc:  # pgserver raises bare exceptions; wrap them at this gateway
        raise StoreUnavailable(f"cannot start embedded PostgreSQL in {pgdata}: {exc}") from exc
    return EmbeddedPostgres(url=server.get_uri(), _server=server)


def _forget_gone_users(pgdata: Path, lock: Any) -> list[int]:
    """Drop the pids of processes that no longer exist from pgserver's list; the dropped."""
    path = pgdata / HANDLE_PIDS
    with lock:
        try:
            listed = json.loads(path.read_text())
        except (OSError, ValueError):
            return []  # no list (a fresh data dir) or not one we can read: leave it to pgserver
        if not isinstance(listed, list) or not all(isinstance(p, int) for p in listed):
            return []
        gone = [pid for pid in listed if not _running(pid)]
        if gone:
            path.write_text(json.dumps([pid for pid in listed if pid not in gone]))
        return gone


def _running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie, killed but not yet reaped, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no /proc (not Linux): the kill probe said it exists
    return state != "Z"
