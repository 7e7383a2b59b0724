"""`converge up` tells the truth about tokens (L4) and does not leave its embedded
PostgreSQL running for good after a crash (L6).

Real: the `converge up` executable; for L6 its embedded PostgreSQL (pgserver) under a
temporary data dir, `kill -9` of `up` (SIGKILL), then a second `up` stopped cleanly
with SIGTERM; the postmaster is watched through its pid file and the kernel.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

import aiohttp
import pytest

from tests.support.hostile import ALPHA, Api, start_server
from tests.support.ports import free_port
from tests.support.processes import ServiceProcess
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


async def test_with_api_tokens_set_no_demo_token_or_export_line_is_printed(
    tmp_path: Path, database_url: str
) -> None:
    async with start_server(tmp_path, database_url) as server:
        output = "\n".join(server.process.lines)
        assert "from CONVERGE_API_TOKENS" in output
        assert "CONVERGE_TOKEN=" not in output, output
        assert not (tmp_path / "credentials.json").exists(), "no token is made that would not work"


async def test_a_token_an_earlier_run_stored_is_said_to_be_refused(tmp_path: Path, database_url: str) -> None:
    stale = "token-of-an-earlier-run-without-api-tokens"
    (tmp_path / "credentials.json").write_text(json.dumps({"token": stale, "project_id": "demo"}))
    async with start_server(tmp_path, database_url) as server, aiohttp.ClientSession() as http:
        output = "\n".join(server.process.lines)
        assert stale not in output
        assert f"{tmp_path / 'credentials.json'} is not one of them" in output
        api = Api(http, server.base)
        assert (await api.call("GET", "/v1/demo/stacks", token=stale)).status == 401
        assert (await api.call("GET", "/v1/alpha/stacks", token=ALPHA[0])).status == 200


def postmaster_pid(data_dir: Path) -> int:
    return int((data_dir / "postgres" / "postmaster.pid").read_text().splitlines()[0])


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):  # a zombie is not running
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


async def up_on(data_dir: Path) -> ServiceProcess:
    env = {
        "CONVERGE_DATA_DIR": str(data_dir),
        "CONVERGE_API_PORT": str(free_port()),
        "CONVERGE_DATABASE_URL": "",  # the embedded default
        "CONVERGE_AMQP_URL": "",
    }
    process = await ServiceProcess(["converge", "up"], env).start()
    await process.wait_for_event("ready", timeout=120)
    return process


@pytest.mark.timeout(300)
async def test_after_a_crash_the_next_up_adopts_the_embedded_server_and_stops_it_on_a_clean_stop(
    tmp_path: Path,
) -> None:
    crashed = await up_on(tmp_path)
    postmaster = postmaster_pid(tmp_path)
    second: ServiceProcess | None = None
    try:
        crashed.signal(signal.SIGKILL)
        assert await crashed.wait() == -signal.SIGKILL
        assert running(postmaster), "a crash leaves the server running (nothing could stop it)"

        second = await up_on(tmp_path)
        assert postmaster_pid(tmp_path) == postmaster, "the next up reuses the server it found"
        second.signal(signal.SIGTERM)
        assert await second.wait() == 0
        await eventually(lambda: not running(postmaster), timeout=60)
        assert any(e.get("event") == "embedded_postgres_adopted" for e in second.events), "and says so"
    finally:
        for process in (crashed, second):
            if process is not None:
                await process.stop()
        if running(postmaster):  # the old behaviour: do not leave it behind for the next test
            os.kill(postmaster, signal.SIGINT)
            await eventually(lambda: not running(postmaster), timeout=60)
