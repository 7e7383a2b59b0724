"""A PostgreSQL server and a RabbitMQ node of one test module's own, to restart.

Other tests share the suite's servers, so a test that restarts a server
starts its own: `PrivatePostgres` through the pgserver wheel (Unix socket,
data in a temporary directory; `crash` is an immediate shutdown, as if the
server died, and `start` runs crash recovery), `PrivateRabbit` as a
`rabbitmq-server` node on free ports (tests/support/provide_services.py),
whose RabbitMQ application is stopped and started again. Both are removed
on `close`.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import subprocess
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from tests.support.databases import create_database
from tests.support.provide_services import provide_rabbitmq


@dataclass
class PrivatePostgres:
    directory: Path
    _server: Any

    @classmethod
    async def start(cls) -> PrivatePostgres:
        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            import pgserver
        directory = Path(tempfile.mkdtemp(prefix="converge-restart-pg-"))
        server = await asyncio.to_thread(pgserver.get_server, directory / "data", cleanup_mode="delete")
        return cls(directory, server)

    def url(self, database: str = "postgres") -> str:
        return str(self._server.get_uri(database))

    async def create_database(self, name: str) -> str:
        return await create_database(self.url(), name)

    async def crash(self) -> None:
        """Immediate shutdown (SIGQUIT to the postmaster): every connection drops,
        nothing is checkpointed; wait until the server is gone."""
        postmaster = psutil.Process(self._server.get_pid())
        postmaster.send_signal(signal.SIGQUIT)
        await asyncio.to_thread(postmaster.wait, 60)

    async def start_again(self) -> None:
        """Start the server on the same data (crash recovery first) and socket."""
        await asyncio.to_thread(self._server.ensure_postgres_running)

    async def close(self) -> None:
        await asyncio.to_thread(self._server.cleanup)
        shutil.rmtree(self.directory, ignore_errors=True)


@dataclass
class PrivateRabbit:
    url: str
    node: str
    _stack: contextlib.ExitStack

    @classmethod
    async def start(cls) -> PrivateRabbit:
        stack = contextlib.ExitStack()
        url, node = await asyncio.to_thread(provide_rabbitmq, stack)
        return cls(url, node, stack)

    async def ctl(self, *args: str) -> str:
        command = ["rabbitmqctl", "-n", self.node, "-q", *args]
        done = await asyncio.to_thread(
            subprocess.run, command, check=True, capture_output=True, text=True, timeout=120
        )
        return done.stdout

    async def stop_app(self) -> None:
        """Stop the broker (the Erlang node stays up): every connection is closed."""
        await self.ctl("stop_app")

    async def start_app(self) -> None:
        await self.ctl("start_app")
        await self.ctl("await_startup", "--timeout", "60")

    async def close(self) -> None:
        await asyncio.to_thread(self._stack.close)
