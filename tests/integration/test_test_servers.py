"""The test servers themselves (tests/support/hostile.py): a `converge up` the hostile,
tenancy and settings tests start is started again on another port when the one it was
given is taken before it binds it (a port picked free is not reserved).

Real: a `converge up` process, PostgreSQL, HTTP, and a real socket holding the port.
"""

from __future__ import annotations

import socket
from contextlib import closing
from pathlib import Path

import aiohttp
import pytest

from tests.support import hostile
from tests.support.hostile import start_server
from tests.support.ports import free_port

pytestmark = pytest.mark.integration


async def test_a_test_server_whose_port_was_taken_before_it_bound_starts_on_another(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first port the helper picks is held by another socket by the time `converge up`
    binds it: the server exits saying so, and the helper starts it on a free one."""
    with closing(socket.socket()) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        held = int(taken.getsockname()[1])
        picks = iter([held, free_port()])
        monkeypatch.setattr(hostile, "free_port", lambda: next(picks))
        async with start_server(tmp_path, database_url) as server, aiohttp.ClientSession() as http:
            assert not server.base.endswith(f":{held}")
            async with http.get(f"{server.base}/healthz") as response:
                assert response.status == 200
