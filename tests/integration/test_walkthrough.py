"""The README's quick start and walkthrough work as written, for a newcomer without root,
without a browser, on whatever port is free.

Real: a copy of this checkout owned by an unprivileged user (`nobody` when the
tests run as root; Chromium hidden from it: tests/support/unprivileged.py),
`make up` from the quick start run there as that user on a port other than
8004 (CONVERGE_API_PORT, as the README says), the embedded PostgreSQL and the
in-process sandbox cloud it starts, then bash running, as the same user, the
lines the banner printed under "Next" and the commands between
`<!-- walkthrough -->` and `<!-- /walkthrough -->`, in order, each of which
must exit 0. Where a person would wait for something to happen (the drift to
be found and healed) the test waits on that condition, with a generous bound,
before going on. Ctrl-C (SIGINT to the terminal's process group) ends it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest

from tests.support import readme
from tests.support.ports import free_port
from tests.support.unprivileged import Newcomer, newcomer
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

SEARCH_CHROMIUM = """for name in chromium chromium-browser google-chrome; do
  path=$(command -v "$name" || true)
  if [ -f "$path" ] && [ -x "$path" ]; then echo "$path"; fi
done
echo none"""


def walkthrough() -> list[list[str]]:
    """The walkthrough's commands, in segments: a segment ends after the command that
    breaks something, where the test waits for Converge to notice and heal it."""
    segments: list[list[str]] = [[]]
    for line in readme.commands("walkthrough"):
        segments[-1].append(line)
        if "/break" in line:
            segments.append([])
    return segments


@dataclass
class Terminal:
    """`make up` running in the newcomer's first terminal."""

    user: Newcomer
    port: int
    process: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)
    reader: asyncio.Task[None] | None = None

    async def read(self) -> None:
        assert self.process.stdout is not None
        async for raw in self.process.stdout:
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))

    def output(self) -> str:
        return "\n".join(self.lines[-80:])

    def banner(self) -> list[str] | None:
        """The lines from "Converge is up." to "Press Ctrl-C to stop.", once printed."""
        if "Press Ctrl-C to stop." not in self.lines:
            return None
        return self.lines[self.lines.index("Converge is up.") : self.lines.index("Press Ctrl-C to stop.") + 1]

    def events(self) -> list[str]:
        events = []
        for line in self.lines:
            try:
                parsed = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(parsed, dict):
                events.append(str(parsed.get("event")))
        return events


@pytest.fixture
async def terminal() -> AsyncIterator[Terminal]:
    port = free_port()
    assert port != 8004
    with newcomer() as user:
        (command,) = readme.commands("quickstart")
        process = await asyncio.create_subprocess_exec(
            *user.command(command.split(), {"CONVERGE_API_PORT": str(port)}),
            cwd=user.checkout,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,  # its own process group, as a terminal's foreground job
        )
        running = Terminal(user, port, process)
        running.reader = asyncio.create_task(running.read())
        try:
            yield running
        finally:
            if process.returncode is None:
                os.killpg(process.pid, signal.SIGKILL)
                await process.wait()
            await running.reader


async def run(user: Newcomer, script: Sequence[str]) -> str:
    """`script` in bash, as the newcomer, in the checkout; every command must exit 0."""
    process = await asyncio.create_subprocess_exec(
        *user.command(["bash", "-c", "set -euo pipefail\n" + "\n".join(script)]),
        cwd=user.checkout,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    async with asyncio.timeout(300):
        out, _ = await process.communicate()
    output = out.decode(errors="replace")
    assert process.returncode == 0, f"{list(script)} exited {process.returncode}:\n{output}"
    return output


@dataclass
class Api:
    base: str
    token: str
    http: aiohttp.ClientSession

    async def get(self, path: str) -> Any:
        headers = {"X-Auth-Token": self.token}
        async with self.http.get(f"{self.base}/v1/demo{path}", headers=headers) as response:
            assert response.status == 200, await response.text()
            return await response.json()


@pytest.mark.timeout(420)
async def test_the_quick_start_and_the_walkthrough_work_as_written_for_a_newcomer(terminal: Terminal) -> None:
    user = terminal.user
    seen = await run(user, [SEARCH_CHROMIUM])
    # As root, a Chromium installed on this machine (CI's `make browser`) is hidden from the
    # newcomer; a machine without one has nothing to hide.
    assert seen.split() == ["none"], f"no Chromium the newcomer could run on PATH (hidden: {user.hidden})"
    assert "8004" not in "\n".join(readme.commands("walkthrough")), "the walkthrough works on any port"

    await eventually(
        lambda: terminal.banner() is not None or terminal.process.returncode is not None, timeout=180
    )
    banner = terminal.banner()
    assert banner is not None, terminal.output()
    start = next(i for i, line in enumerate(banner) if line.startswith("Next, in another terminal"))
    next_steps = [line.strip() for line in banner[start + 1 : -1]]
    base = f"http://127.0.0.1:{terminal.port}"
    token = json.loads((user.checkout / "data" / "credentials.json").read_text())["token"]
    assert next_steps == [
        ". .venv/bin/activate",
        f"export CONVERGE_URL={base} CONVERGE_TOKEN={token}",
        "converge stack list",
    ], banner

    before_break, after_break = walkthrough()
    output = await run(user, [*next_steps, *before_break])
    assert "CREATE_COMPLETE" in output

    async with aiohttp.ClientSession() as http:
        api = Api(base, token, http)
        stack = (await api.get("/stacks?name=web"))["stacks"][0]
        path = f"/stacks/web/{stack['id']}"
        broken = (await api.get(f"{path}/resources/web1"))["resource"]["physical_resource_id"]

        async def healed() -> bool:
            observation = (await api.get(f"{path}/observation"))["observation"]
            current = (await api.get(f"{path}/resources/web1"))["resource"]["physical_resource_id"]
            state = (await api.get(path))["stack"]["stack_status"]
            return current != broken and not observation["drifted"] and state == "UPDATE_COMPLETE"

        await eventually(healed, timeout=120, every=0.25)
        events = (await api.get(f"{path}/events?limit=1000"))["events"]
        assert any(e["resource_status"] == "OBSERVE_DRIFTED" and e["resource_name"] == "web1" for e in events)

    output = await run(user, [*next_steps, *after_break])
    assert "Healing drift of web1" in output, "the event list shows the healing"
    assert json.loads(output.strip().splitlines()[-1])["resources"] == [], "the cloud is empty again"

    os.killpg(terminal.process.pid, signal.SIGINT)  # Ctrl-C
    async with asyncio.timeout(60):
        await terminal.process.wait()
    assert "stopped" in terminal.events(), terminal.output()
    assert not (user.checkout / "data" / "postgres" / "postmaster.pid").exists(), "PostgreSQL stopped too"
    assert not any("Traceback" in line or "RuntimeDirWarning" in line for line in terminal.lines), (
        terminal.output()
    )
