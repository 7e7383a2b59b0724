"""Test hygiene: an async test that leaves tasks pending or connections open fails.

Where it sits: a pytest plugin that tests/conftest.py registers. pytest-asyncio
runs every async test and async fixture on the loop of an `asyncio.Runner`
fixture (`_function_scoped_runner`, or `_module_scoped_runner` and the like
for modules that share one loop). Right before that runner closes its loop,
after every fixture that used the loop has been torn down, `LeakGuard` looks
at what is still alive on it:

- tasks still pending. Each gets `grace` seconds to finish on its own (a
  close already under way), then those left are named and the test errors at
  teardown. Without the guard pytest-asyncio cancels them silently, so a
  background loop nobody stops, or a task nobody awaits, would go unnoticed;
- sockets and pipes still registered with the loop's selector (a database
  pool, an AMQP connection, an HTTP server or client connection nobody
  closed). A transport unregisters the moment it is closed, so there is no
  race here.

For a loop shared by a module, the check runs once, after the module's last
test, and is reported there. Synchronous tests (no loop of pytest-asyncio)
are not checked, nor are loops a test runs itself (`asyncio.run`). The guard
reads two CPython asyncio internals (`_selector`, `_ssock`); on a loop without
them (uvloop) the connection check is skipped, the task check still runs.
tests/unit/test_hygiene_guard.py proves the guard fires, and stays silent on
a clean test.
"""

from __future__ import annotations

import asyncio
import functools
import os
import selectors
import socket
from collections.abc import Generator
from typing import Any

import pytest

# pytest-asyncio's runner fixtures, one per loop scope (`_{scope}_scoped_runner`).
RUNNERS = frozenset(
    f"_{scope}_scoped_runner" for scope in ("function", "class", "module", "package", "session")
)


class LeakGuard:
    """The plugin. `grace`: how long (seconds) pending tasks may take to finish once the
    loop's last fixture is torn down, before they count as leaked."""

    def __init__(self, *, grace: float = 5.0) -> None:
        self.grace = grace

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[Any]) -> Generator[None, Any, Any]:
        runner = yield
        if fixturedef.argname in RUNNERS and isinstance(runner, asyncio.Runner):
            # Finalizers run last-added first: this one runs after those of every fixture
            # set up on the loop since (pytest-asyncio adds theirs to the runner's fixture
            # too) and before the runner's own teardown, which closes the loop.
            fixturedef.addfinalizer(functools.partial(self.check, runner))
        return runner

    def check(self, runner: asyncio.Runner) -> None:
        loop = runner.get_loop()
        if loop.is_closed():
            return
        leaks = runner.run(self._leaks(loop))
        if leaks:
            pytest.fail(
                "left behind on the test's event loop after its fixtures were torn down:\n  "
                + "\n  ".join(leaks),
                pytrace=False,
            )

    async def _leaks(self, loop: asyncio.AbstractEventLoop) -> list[str]:
        pending = asyncio.all_tasks(loop) - {asyncio.current_task()}
        if pending:
            await asyncio.wait(pending, timeout=self.grace)
        left = {t for t in pending if not t.done()}
        tasks = [f"task {_describe_task(t)}" for t in left]
        for task in left:  # cancelled now, they may still close what they opened
            task.cancel()
        if left:
            await asyncio.wait(left, timeout=self.grace)
        opened = [f"open {what}" for what in _release_registered(loop)]
        await asyncio.sleep(0)  # closed transports tell their protocols
        return tasks + opened


def _describe_task(task: asyncio.Task[Any]) -> str:
    coro = task.get_coro()
    name = getattr(coro, "__qualname__", None) or repr(coro)
    return f"{task.get_name()!r} running {name}"


def _release_registered(loop: asyncio.AbstractEventLoop) -> list[str]:
    """Describe and close what is still registered with the loop's selector, besides the
    loop's own wake-up pipe (closed here, it cannot warn later, from the garbage collector,
    in whichever test happens to run then)."""
    selector: selectors.BaseSelector | None = getattr(loop, "_selector", None)
    if selector is None:
        return []
    own = getattr(loop, "_ssock", None)
    own_fd = own.fileno() if own is not None else -1
    found = []
    for key in list(selector.get_map().values()):
        if key.fd == own_fd:
            continue
        handles = [h for h in (key.data if isinstance(key.data, tuple) else ()) if h is not None]
        owner = next((h._callback.__self__ for h in handles if hasattr(h._callback, "__self__")), None)
        what = "server" if owner is loop else type(owner).__name__ if owner is not None else "file"
        found.append(f"{what} {_where(key.fd)}")
        if isinstance(owner, asyncio.BaseTransport):
            owner.close()
        else:  # a listening socket: the loop accepts on it (`start_server`); the socket is an argument
            sockets = [a for h in handles for a in (h._args or ()) if isinstance(a, socket.socket)]
            loop.remove_reader(key.fd)
            loop.remove_writer(key.fd)
            for sock in sockets:
                sock.close()
    return found


def _where(fd: int) -> str:
    """The socket's addresses, read from a duplicate of its descriptor (or just the descriptor)."""
    duplicate = os.dup(fd)
    try:
        sock = socket.socket(fileno=duplicate)
    except OSError:  # not a socket (a pipe)
        os.close(duplicate)
        return f"(fd {fd})"
    with sock:
        local = _address(sock.getsockname())
        try:
            return f"to {_address(sock.getpeername())} (fd {fd})"
        except OSError:  # not connected: a listening socket
            return f"listening on {local} (fd {fd})"


def _address(address: object) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return str(address)
