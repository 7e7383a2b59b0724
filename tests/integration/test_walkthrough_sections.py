"""The README's walkthroughs of a configured web tier and of an autoscaling group driven
by the sandbox alarm work as written.

Real: `converge up` (engine, worker, observer, the in-process sandbox cloud whose
servers run their configuration agents and whose alarms POST scaling policies, on
PostgreSQL) started as its own process, and bash running, in this checkout, the
lines its banner prints under "Next" and then the commands between
`<!-- walkthrough-configured -->` / `<!-- walkthrough-autoscaling -->` and their
closing markers, in order, each of which must exit 0. Where a person would wait
for something to happen (the alarm to fire and the group to grow) the test waits on
that condition through the API, with a generous bound, before going on. Both run
against one `converge up`, one after the other, as a person would in one terminal. What the
commands print is checked against what the README's comments say they print.
(The quick start and the first walkthrough, as a newcomer without root:
test_walkthrough.py.)
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support import readme
from tests.support.sandbox import RunningUp, start_up
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def up(tmp_path: Path, database_url: str) -> AsyncIterator[RunningUp]:
    running = await start_up(tmp_path, database_url, latency=0.5)
    try:
        yield running
    finally:
        await running.process.stop()


def next_steps(up: RunningUp) -> list[str]:
    """What the banner says to type first (test_walkthrough.py checks the banner says it)."""
    return [". .venv/bin/activate", f"export CONVERGE_URL={up.base} CONVERGE_TOKEN={up.token}"]


async def run(up: RunningUp, script: Sequence[str]) -> str:
    """`script` in bash in this checkout, after the banner's lines; every command must exit 0."""
    process = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        "\n".join(["set -euo pipefail", *next_steps(up), *script]),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    async with asyncio.timeout(300):
        out, _ = await process.communicate()
    output = out.decode(errors="replace")
    assert process.returncode == 0, f"{list(script)} exited {process.returncode}:\n{output}"
    return output


def split_after(commands: list[str], last: str) -> tuple[list[str], list[str]]:
    """The commands up to and including the line `last`, and the rest."""
    at = commands.index(last) + 1
    return commands[:at], commands[at:]


def json_blocks(output: str) -> list[Any]:
    """The JSON values printed over several lines (from a line "{" or "[" to its closing one)."""
    found, block = [], list[str]()
    for line in output.splitlines():
        if block or line in ("{", "["):
            block.append(line)
            if line in ("}", "]"):
                found.append(json.loads("\n".join(block)))
                block = []
    return found


async def get(up: RunningUp, path: str) -> Any:
    async with (
        aiohttp.ClientSession(headers={"X-Auth-Token": up.token}) as http,
        http.get(f"{up.base}/v1/demo{path}") as response,
    ):
        assert response.status == 200, await response.text()
        return await response.json()


async def test_the_configured_web_tier_and_the_autoscaling_walkthroughs_work_as_written(
    up: RunningUp,
) -> None:
    # A configured web tier: both servers' deployments complete from their agents' signals,
    # with their outputs, and a new parameter deploys the config again.
    output = await run(up, readme.commands("walkthrough-configured"))
    lines = output.splitlines()
    deployed, urls, redeployed = json_blocks(output)
    assert deployed == {"web1": "site 1.0 installed on web1\n", "web2": "site 1.0 installed on web2\n"}
    assert urls == {"web1": "http://web1/v1.0/", "web2": "http://web2/v1.0/"}, "the declared output"
    assert redeployed == {"web1": "site 1.1 installed on web1\n", "web2": "site 1.1 installed on web2\n"}
    listed = next(i for i, line in enumerate(lines) if "Server ID" in line)
    assert "COMPLETE" in lines[listed + 2], "the deployment to web1, listed by its server"
    assert (await get(up, "/stacks?name=site"))["stacks"] == [], "deleted at the end"
    assert (await get(up, "/software_deployments"))["software_deployments"] == [], "with its deployments"

    # An autoscaling group driven by the sandbox alarm, in the same `converge up`: loads over
    # the threshold, then (once the alarm has fired and the group grown) the rest.
    loaded, after = split_after(readme.commands("walkthrough-autoscaling"), "done")
    output = await run(up, loaded)
    size, *loads = output.splitlines()[-3:]
    assert size == "2", output
    assert [json.loads(line)["load"] for line in loads] == [90, 90], output
    stack = (await get(up, "/stacks?name=asg"))["stacks"][0]

    async def grown() -> bool:
        shown = (await get(up, f"/stacks/asg/{stack['id']}"))["stack"]
        now = {o["output_key"]: o["output_value"] for o in shown["outputs"]}["size"]
        return bool(now == 3)

    await eventually(grown, timeout=120, every=0.25)
    output = await run(up, after)
    lines = output.splitlines()
    assert lines[0] == "3", output
    alarm = json.loads(lines[1])
    assert alarm["actions_sent"] >= 1, alarm
    assert "scale_up" in output, "the policy's signal is in the events"
    assert (await get(up, "/stacks?name=asg"))["stacks"] == [], "deleted at the end"
