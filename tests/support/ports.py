"""Free TCP ports on 127.0.0.1 for services started by tests.

A port is picked here and bound later by another process, so it must not be
taken in between. Ports the kernel hands out itself (binding port 0, and the
source port of every outgoing connection) come from its ephemeral range, where
any connection of any test may take it first; so ports come from below that
range instead, each pytest-xdist worker from a slice of its own (two workers
never pick the same port), in turn from a random start (a port just handed out
is not handed out again soon), and each checked free by binding it.
"""

from __future__ import annotations

import itertools
import os
import random
import socket
from collections.abc import Iterator
from contextlib import closing

LOW, HIGH = 20000, 32768  # below Linux's default ephemeral range (32768-60999)


def _slice() -> range:
    """This process's ports: its xdist worker's share of [LOW, HIGH)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    size = (HIGH - LOW) // max(workers, 1)
    start = LOW + size * worker
    return range(start, start + size)


def _turns() -> Iterator[int]:
    ports = _slice()
    first = random.randrange(len(ports))
    return itertools.cycle([*ports[first:], *ports[:first]])


_TURNS = _turns()


def _bindable(port: int) -> bool:
    with closing(socket.socket()) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    ports = _slice()
    for port in itertools.islice(_TURNS, len(ports)):
        if _bindable(port):
            return port
    raise AssertionError(f"no free port on 127.0.0.1 in {ports.start}-{ports.stop - 1}")
