"""Talking to Converge's HTTP API in integration tests: one request, and waiting for a status.

Where it sits: tests that serve the engine's real HTTP app (`Converge.http` in
tests/support/convergence.py) send requests with `call` (aiohttp, no
redirects followed) and drive python-heatclient, in a worker thread, until a
stack reaches a status with `wait_for` (through `waiting.eventually_blocking`).
"""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.support.waiting import eventually_blocking


async def call(method: str, url: str, token: str | None, body: Any = None) -> tuple[int, Any, dict[str, str]]:
    """(status, JSON or text body, headers) of one request, with `token` as X-Auth-Token."""
    headers = {"X-Auth-Token": token} if token is not None else {}
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, url, json=body, headers=headers, allow_redirects=False) as response,
    ):
        data = await response.json() if response.content_type == "application/json" else await response.text()
        return response.status, data, dict(response.headers)


def wait_for(hc: Any, stack_id: str, wanted: str, *, timeout: float = 30, failed_ok: bool = False) -> None:
    """Block until heatclient `hc` shows the stack `wanted` (a stack gone is DELETE_COMPLETE).
    A FAILED status fails at once, unless `failed_ok` (a FAILED status may be what is wanted)."""
    from heatclient import exc

    def status() -> str:
        try:
            return str(hc.stacks.get(stack_id).stack_status)
        except exc.HTTPNotFound:
            return "DELETE_COMPLETE"

    def reached() -> bool:
        now = status()
        assert failed_ok or now == wanted or not now.endswith("FAILED"), now
        return now == wanted

    eventually_blocking(reached, timeout=timeout, what=f"stack {stack_id} {wanted}")
