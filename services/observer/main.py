"""`converge-observer`: the observer process.

Start-up: settings (exit 2 if bad) -> logging -> resource types -> HTTP
client (allow-listed) -> bus -> health server -> consume `observe` ->
`ready`. SIGTERM/SIGINT stops taking requests, hands running watches back to
the queue (another observer resumes them) and exits 0.
"""

from __future__ import annotations

import sys

from services.observer.service import ObserverMetrics, ObserverService
from shared.host import serve_plugin_service
from shared.logging import configure_logging
from shared.service import run_service
from shared.settings import ObserverSettings, load_settings

PROGRAM = "converge-observer"


def main() -> int:
    settings = load_settings(ObserverSettings, program=PROGRAM)
    configure_logging(level=settings.log_level, fmt=settings.log_format)
    return run_service(
        lambda stop: serve_plugin_service(
            settings,
            stop,
            name="observer",
            consumptions=lambda bus, runtime, registry: ObserverService(
                bus=bus,
                runtime=runtime,
                concurrency=settings.observer_concurrency,
                metrics=ObserverMetrics(registry),
            ).consumptions(),
        ),
        name="observer",
    )


if __name__ == "__main__":
    sys.exit(main())
