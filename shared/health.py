"""Health and metrics over HTTP: `/healthz`, `/readyz`, `/metrics`.

The engine mounts these routes on its API server; the worker and observer
serve them on their own `HEALTH_PORT`. In `converge up` every service's
readiness and metrics are served on the one API port.

- `/healthz`: the process is alive and its event loop answers (200).
- `/readyz`: every named readiness check is true (200), else 503 with which.
- `/metrics`: Prometheus text format from the service's registry.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


class Readiness:
    """Named readiness flags, e.g. `bus`, `database`, `draining`."""

    def __init__(self) -> None:
        self._checks: dict[str, Callable[[], bool]] = {}

    def add(self, name: str, check: Callable[[], bool]) -> None:
        self._checks[name] = check

    def status(self) -> dict[str, bool]:
        return {name: bool(check()) for name, check in self._checks.items()}

    def ready(self) -> bool:
        return all(self.status().values())


def health_routes(*, readiness: Readiness, registry: CollectorRegistry) -> list[web.RouteDef]:
    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(_: web.Request) -> web.Response:
        checks = readiness.status()
        ok = all(checks.values())
        return web.json_response(
            {"status": "ready" if ok else "not ready", "checks": checks}, status=200 if ok else 503
        )

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    return [web.get("/healthz", healthz), web.get("/readyz", readyz), web.get("/metrics", metrics)]


async def start_http(app: web.Application, *, host: str, port: int) -> web.AppRunner:
    """Start serving `app`; the caller cleans up the returned runner."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True)
    try:
        await site.start()
    except OSError:
        await runner.cleanup()
        raise
    return runner
