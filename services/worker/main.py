"""`converge-worker`: the worker process.

Start-up: settings (exit 2 if bad) -> logging -> resource types (entry
points) -> HTTP client (allow-listed; the endpoints of the catalog, e.g.
CONVERGE_SANDBOX_URL, are allowed too) -> bus -> health server -> consume
`jobs` -> `ready`. SIGTERM/SIGINT stops taking jobs, lets running ones finish
within CONVERGE_DRAIN_SECONDS (the rest are redelivered elsewhere) and exits 0.
"""

from __future__ import annotations

import sys

from services.worker.service import WorkerMetrics, WorkerService
from shared.host import serve_plugin_service
from shared.logging import configure_logging
from shared.service import run_service
from shared.settings import WorkerSettings, load_settings, plugin_endpoints

PROGRAM = "converge-worker"


def main() -> int:
    settings = load_settings(WorkerSettings, program=PROGRAM)
    configure_logging(level=settings.log_level, fmt=settings.log_format)
    endpoints = plugin_endpoints(sandbox_url=settings.sandbox_url)
    return run_service(
        lambda stop: serve_plugin_service(
            settings,
            stop,
            name="worker",
            api_url=settings.public_api_url,
            endpoints=endpoints,
            service=lambda bus, runtime, registry: WorkerService(
                bus=bus,
                deps=runtime,
                concurrency=settings.worker_concurrency,
                metrics=WorkerMetrics(registry),
            ),
        ),
        name="worker",
        event_loop=settings.event_loop,
    )


if __name__ == "__main__":
    sys.exit(main())
