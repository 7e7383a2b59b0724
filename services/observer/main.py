"""`converge-observer`: the observer process.

Start-up: settings (exit 2 if bad) -> logging -> resource types -> HTTP
client (allow-listed; the endpoints of the catalog, e.g. CONVERGE_SANDBOX_URL,
are allowed too) -> bus -> health server -> consume `observe`, and the
notification queue of each provider in the catalog -> `ready`.
SIGTERM/SIGINT stops taking requests, hands running watches back to the
queue (another observer resumes them) and exits 0.
"""

from __future__ import annotations

import sys

from services.observer.service import ObserverMetrics, ObserverService
from shared.host import serve_plugin_service
from shared.logging import configure_logging
from shared.service import run_service
from shared.settings import ObserverSettings, load_settings, plugin_endpoints

PROGRAM = "converge-observer"


def main() -> int:
    settings = load_settings(ObserverSettings, program=PROGRAM)
    configure_logging(level=settings.log_level, fmt=settings.log_format)
    endpoints = plugin_endpoints(sandbox_url=settings.sandbox_url)
    return run_service(
        lambda stop: serve_plugin_service(
            settings,
            stop,
            name="observer",
            endpoints=endpoints,
            service=lambda bus, runtime, registry: ObserverService(
                bus=bus,
                runtime=runtime,
                providers=tuple(endpoints),
                concurrency=settings.observer_concurrency,
                metrics=ObserverMetrics(registry),
            ),
        ),
        name="observer",
        event_loop=settings.event_loop,
    )


if __name__ == "__main__":
    sys.exit(main())
