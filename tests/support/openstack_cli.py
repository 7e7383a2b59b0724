"""The real `openstack` CLI (python-openstackclient with heatclient's plugin), pointed at a
Converge API with a static token, as an operator would without Keystone.

Each call is a real process (`--os-auth-type admin_token --os-endpoint .../v1/<project>`),
run in a thread so the test's event loop keeps serving the API it talks to.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


@dataclass(frozen=True)
class OpenStack:
    endpoint: str  # http://127.0.0.1:<port>/v1/<project>
    token: str
    home: Path  # a directory of the test's own (the CLI writes its cache there)

    async def run(self, *args: str, stdin: str | None = None) -> Result:
        command = [
            str(BIN / "openstack"),
            "--os-auth-type",
            "admin_token",
            "--os-endpoint",
            self.endpoint,
            "--os-token",
            self.token,
            *args,
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
        env["HOME"] = str(self.home)

        def run() -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                command, env=env, input=stdin, capture_output=True, text=True, timeout=90, check=False
            )

        done = await asyncio.to_thread(run)
        return Result(done.returncode, done.stdout, done.stderr)

    async def ok(self, *args: str) -> str:
        """The command's output; it must succeed."""
        result = await self.run(*args)
        assert result.code == 0, f"openstack {' '.join(args)}:\n{result.out}\n{result.err}"
        return result.out

    async def json(self, *args: str) -> Any:
        """`openstack ... -f json` that must succeed: its output, parsed."""
        return json.loads(await self.ok(*args, "-f", "json"))
