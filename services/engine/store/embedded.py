"""Embedded PostgreSQL (the `pgserver` wheel) for `converge up` and the
engine's no-URL default. Data lives under `<data_dir>/postgres` and survives
restarts; the server is stopped (not wiped) when the process exits.
"""

from __future__ import annotations

import asyncio
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
    try:
        server = await asyncio.to_thread(pgserver.get_server, pgdata, cleanup_mode="stop")
    except Exception as exc:  # pgserver raises bare exceptions; wrap them at this gateway
        raise StoreUnavailable(f"cannot start embedded PostgreSQL in {pgdata}: {exc}") from exc
    return EmbeddedPostgres(url=server.get_uri(), _server=server)
