"""Run Converge's real console scripts as child processes in tests.

`ServiceProcess` starts a script with a given environment, collects its JSON
log lines, and lets a test wait (with a generous bound) for a log event,
send real signals and read the exit code.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent


@dataclass
class ServiceProcess:
    argv: list[str]
    env: dict[str, str]
    process: asyncio.subprocess.Process | None = None
    lines: list[str] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    _reader: asyncio.Task[None] | None = None

    async def start(self) -> ServiceProcess:
        self.process = await asyncio.create_subprocess_exec(
            str(BIN / self.argv[0]),
            *self.argv[1:],
            env={**os.environ, "CONVERGE_LOG_FORMAT": "json", "CONVERGE_LOG_LEVEL": "debug", **self.env},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        self._reader = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        assert self.process is not None
        assert self.process.stdout is not None
        async for raw in self.process.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            async with self._changed:
                self.lines.append(line)
                try:
                    parsed = json.loads(line)
                except json.JSONDecodeError:
                    parsed = None
                if isinstance(parsed, dict):
                    self.events.append(parsed)
                self._changed.notify_all()
        # Its output ended: wait for it to be reaped too, so that a waiter woken now sees
        # the exit (the pipe closes before the return code is known).
        await self.process.wait()
        async with self._changed:
            self._changed.notify_all()

    async def wait_for_event(self, name: str, *, timeout: float = 60) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            return next((e for e in self.events if e.get("event") == name), None)

        try:
            async with asyncio.timeout(timeout), self._changed:
                while (event := found()) is None:
                    if self.process is not None and self.process.returncode is not None:
                        raise AssertionError(f"{self.argv[0]} exited before {name!r}:\n" + self.output())
                    await self._changed.wait()
                return event
        except TimeoutError:
            message = f"{self.argv[0]} logged no {name!r} in {timeout} s:\n"
            raise AssertionError(message + self.output()) from None

    def output(self) -> str:
        return "\n".join(self.lines[-60:])

    def signal(self, sig: signal.Signals) -> None:
        assert self.process is not None
        self.process.send_signal(sig)

    async def wait(self, *, timeout: float = 60) -> int:
        assert self.process is not None
        async with asyncio.timeout(timeout):
            code = await self.process.wait()
            if self._reader is not None:
                await self._reader
        return code

    async def stop(self) -> None:
        """Best-effort teardown for fixtures: kill if still running."""
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        if self._reader is not None:
            await self._reader


async def run_script(argv: list[str], env: dict[str, str], *, timeout: float = 60) -> tuple[int, str]:
    """Run a console script to completion; return (exit code, combined output)."""
    process = await asyncio.create_subprocess_exec(
        str(BIN / argv[0]),
        *argv[1:],
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    async with asyncio.timeout(timeout):
        out, _ = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(errors="replace")
