"""`deploy/cluster.py` (honcho running deploy/Procfile) as a child process in tests.

`LaunchedCluster` starts the launcher, splits honcho's multiplexed output back
into each process's JSON log events and honcho's own `system` lines, and
lets a test wait for them, send honcho a signal and read every exit code.
Honcho starts each process in its own session, so teardown kills the
process groups it reported, never anything else.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "deploy" / "cluster.py"
PORT_STEP = 100  # honcho's distance between Procfile lines' ports
# honcho's line: "12:00:00 worker.1   | text"; its own lines come from "system".
_LINE = re.compile(r"^\d\d:\d\d:\d\d (\S+)\s*\| (.*)$")
_STARTED = re.compile(r"^(\S+) started \(pid=(\d+)\)$")
_STOPPED = re.compile(r"^(\S+) stopped \(rc=(-?\d+)\)$")
T = TypeVar("T")


def free_base_port(process_types: int, per_type: int) -> int:
    """A base port whose honcho layout (base + 100 x type + instance) is all free, below
    the ephemeral range so that `free_port()` users elsewhere rarely collide."""
    for _ in range(200):
        base = random.randrange(20000, 32000 - PORT_STEP * process_types, 10)
        wanted = [base + PORT_STEP * t + i for t in range(process_types) for i in range(per_type)]
        if all(_free(port) for port in wanted):
            return base
    raise RuntimeError("no free block of ports found")


def _free(port: int) -> bool:
    with closing(socket.socket()) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@dataclass
class LaunchedCluster:
    args: list[str]
    env: dict[str, str]
    process: asyncio.subprocess.Process | None = None
    preamble: list[str] = field(default_factory=list)  # the launcher's own output
    events: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    exit_codes: dict[str, int] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    _reader: asyncio.Task[None] | None = None

    async def start(self) -> LaunchedCluster:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(LAUNCHER),
            *self.args,
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
                self._take(line)
                self._changed.notify_all()
        await self.process.wait()  # the pipe closes before the exit is known: wake waiters after
        async with self._changed:
            self._changed.notify_all()

    def _take(self, line: str) -> None:
        matched = _LINE.match(line)
        if matched is None:
            self.preamble.append(line)
            return
        name, text = matched.groups()
        if name == "system":
            if started := _STARTED.match(text):
                self.pids[started.group(1)] = int(started.group(2))
            elif stopped := _STOPPED.match(text):
                self.exit_codes[stopped.group(1)] = int(stopped.group(2))
            return
        with contextlib.suppress(json.JSONDecodeError):
            event = json.loads(text)
            if isinstance(event, dict):
                self.events.setdefault(name, []).append(event)

    async def wait_until(self, found: Callable[[], T | None], *, what: str, timeout: float = 60) -> T:
        """Wait for `found()` to return something; fail if the launcher exits first."""
        try:
            async with asyncio.timeout(timeout), self._changed:
                while (result := found()) is None:
                    if self.process is not None and self.process.returncode is not None:
                        raise AssertionError(f"the cluster exited before {what}:\n{self.output()}")
                    await self._changed.wait()
                return result
        except TimeoutError:
            raise AssertionError(f"no {what} within {timeout} s:\n{self.output()}") from None

    def logged(self, process: str, event: str) -> list[dict[str, Any]]:
        return [e for e in self.events.get(process, []) if e.get("event") == event]

    async def wait_ready(self, processes: Sequence[str], *, timeout: float = 90) -> None:
        await self.wait_until(
            lambda: all(self.logged(p, "ready") for p in processes) or None,
            what=f"`ready` from {', '.join(processes)}",
            timeout=timeout,
        )

    def output(self) -> str:
        return "\n".join(self.lines[-300:])

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
        """Teardown: SIGKILL honcho and the process groups it started, if still there."""
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        for name, pid in self.pids.items():
            if name not in self.exit_codes:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
        if self._reader is not None:
            await self._reader
