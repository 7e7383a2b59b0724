"""Free TCP ports on 127.0.0.1 for services started by tests."""

from __future__ import annotations

import socket
from contextlib import closing


def free_port() -> int:
    with closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
