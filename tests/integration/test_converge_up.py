"""`converge up` runs everything in one process on embedded defaults and keeps its data.

Real: the `converge` executable, embedded PostgreSQL (pgserver), HTTP, SIGINT.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import aiohttp
import asyncpg
import pytest

from tests.support.ports import free_port
from tests.support.processes import ServiceProcess

pytestmark = pytest.mark.integration


def embedded_url(data_dir: Path) -> str:
    return f"postgresql://postgres@/postgres?host={data_dir / 'postgres'}"


async def start_up(data_dir: Path, port: int) -> ServiceProcess:
    process = await ServiceProcess(
        ["converge", "up"], {"CONVERGE_DATA_DIR": str(data_dir), "CONVERGE_API_PORT": str(port)}
    ).start()
    await process.wait_for_event("ready", timeout=90)
    return process


async def test_up_serves_health_survives_ctrl_c_and_restarts_with_its_data(tmp_path: Path) -> None:
    port = free_port()
    first = await start_up(tmp_path, port)
    try:
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}") as http:
            for path in ("/healthz", "/readyz", "/metrics"):
                async with http.get(path) as response:
                    assert response.status == 200, path
        token = json.loads((tmp_path / "credentials.json").read_text())["token"]
        assert (tmp_path / "credentials.json").stat().st_mode & 0o777 == 0o600
        assert any(token in line for line in first.lines), "the token is printed for the user"
        assert any(f"http://127.0.0.1:{port}/v1/demo" in line for line in first.lines)
        conn = await asyncpg.connect(embedded_url(tmp_path))
        await conn.execute("CREATE TABLE survives_restart (x int); INSERT INTO survives_restart VALUES (42)")
        await conn.close()
        first.signal(signal.SIGINT)
        assert await first.wait() == 0
    finally:
        await first.stop()

    second = await start_up(tmp_path, port)
    try:
        conn = await asyncpg.connect(embedded_url(tmp_path))
        assert await conn.fetchval("SELECT x FROM survives_restart") == 42
        assert await conn.fetchval("SELECT count(*) FROM schema_migrations") >= 1
        await conn.close()
        assert not any(e.get("event") == "migrations_applied" for e in second.events)
        assert any(token in line for line in second.lines), "the same credentials are kept"
        second.signal(signal.SIGTERM)
        assert await second.wait() == 0
    finally:
        await second.stop()
