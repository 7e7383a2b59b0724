"""Embedded PostgreSQL (the `pgserver` wheel) for `converge up` and the
engine's no-URL default. Data lives under `<data_dir>/postgres` and survives
restarts; the server is stopped (not wiped) when the process exits.

A process killed outright (SIGKILL) leaves the server running, which the next
start reattaches to; pgserver counts the processes using a server in a file
and stops it only when the last one exits, so the dead process is struck
off that list first, or the server would never be stopped again.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.errors import StoreUnavailable


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
    _forget_dead_users(pgdata)
    try:
        server = await asyncio.to_thread(pgserver.get_server, pgdata, cleanup_mode="stop")
    except Exception as exc:  # pgserver raises bare exceptions; wrap them at this gateway
        raise StoreUnavailable(f"cannot start embedded PostgreSQL in {pgdata}: {exc}") from exc
    return EmbeddedPostgres(url=server.get_uri(), _server=server)


# pgserver's list of the processes using the server of a data directory.
_USERS_FILE = ".handle_pids.json"


def _forget_dead_users(pgdata: Path) -> None:
    """Strike processes that no longer exist off pgserver's list of the server's users."""
    path = pgdata / _USERS_FILE
    try:
        pids = json.loads(path.read_text())
    except (OSError, ValueError):
        return  # no list (a fresh directory), or not one we understand: leave it to pgserver
    if not isinstance(pids, list):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and _running(pid)]
    if alive != pids:
        path.write_text(json.dumps(alive))


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True
