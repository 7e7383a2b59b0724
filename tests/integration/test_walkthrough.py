"""The README's walkthrough works as written on a fresh `converge up`.

The commands between `<!-- walkthrough -->` and `<!-- /walkthrough -->` in
README.md are run by bash, in order, against a real `converge up` (the
`converge` executable, embedded bus, in-process sandbox cloud), with only the
port changed. Where a person would wait for something to happen (the drift
to be found and healed) the test waits on that condition, with a generous
bound, before going on; each command must exit 0.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.bus_fixtures import eventually
from tests.support.processes import BIN
from tests.support.sandbox import start_up

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
README_PORT = "http://127.0.0.1:8004"


def walkthrough() -> list[list[str]]:
    """The walkthrough's commands, in segments: a segment ends after the command that
    breaks something, where the test waits for Converge to notice and heal it."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- walkthrough -->\n```sh\n(.*?)```\n<!-- /walkthrough -->", text, re.S)
    assert block is not None, "README.md has the walkthrough block"
    segments: list[list[str]] = [[]]
    for line in block.group(1).splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        segments[-1].append(line)
        if "/break" in line:
            segments.append([])
    return segments


@dataclass
class Up:
    base: str
    env: dict[str, str]
    http: aiohttp.ClientSession
    token: str

    async def run(self, commands: list[str]) -> str:
        script = "set -euo pipefail\n" + "\n".join(c.replace(README_PORT, self.base) for c in commands)
        process = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            script,
            cwd=ROOT,
            env=self.env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        async with asyncio.timeout(300):
            out, _ = await process.communicate()
        output = out.decode(errors="replace")
        assert process.returncode == 0, f"{commands} exited {process.returncode}:\n{output}"
        return output

    async def get(self, path: str) -> Any:
        headers = {"X-Auth-Token": self.token}
        async with self.http.get(f"{self.base}/v1/demo{path}", headers=headers) as response:
            assert response.status == 200, await response.text()
            return await response.json()


@pytest.fixture
async def up(tmp_path: Path, database_url: str) -> AsyncIterator[Up]:
    running = await start_up(tmp_path, database_url, latency=0.2)
    shell = {
        **os.environ,
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "CONVERGE_DATA_DIR": str(tmp_path),
        "CONVERGE_URL": running.base,
    }
    try:
        async with aiohttp.ClientSession() as http:
            yield Up(running.base, shell, http, running.token)
    finally:
        await running.process.stop()


async def test_the_readme_walkthrough_works_as_written(up: Up) -> None:
    before_break, after_break = walkthrough()
    output = await up.run(before_break)
    assert "CREATE_COMPLETE" in output

    stack = (await up.get("/stacks?name=web"))["stacks"][0]
    path = f"/stacks/web/{stack['id']}"
    broken = (await up.get(f"{path}/resources/web1"))["resource"]["physical_resource_id"]

    async def healed() -> bool:
        observation = (await up.get(f"{path}/observation"))["observation"]
        current = (await up.get(f"{path}/resources/web1"))["resource"]["physical_resource_id"]
        state = (await up.get(path))["stack"]["stack_status"]
        return current != broken and not observation["drifted"] and state == "UPDATE_COMPLETE"

    await eventually(healed, timeout=120, every=0.25)
    events = (await up.get(f"{path}/events?limit=1000"))["events"]
    assert any(e["resource_status"] == "OBSERVE_DRIFTED" and e["resource_name"] == "web1" for e in events)

    output = await up.run(after_break)
    assert "Healing drift of web1" in output, "the event list shows the healing"
    assert json.loads(output.strip().splitlines()[-1])["resources"] == [], "the cloud is empty again"
