"""Unit tests: pure, no PostgreSQL, RabbitMQ or service process, each under a short timeout.

`make unit` runs this directory alone, as the inner loop (seconds, no services).
Every test here gets `timeout(UNIT_TIMEOUT)` (pytest-timeout) unless it carries
its own mark, so a hang fails in seconds, not after the suite's default of 120:
the slowest unit test takes about 4 s on a quiet machine, and the bound leaves
room for a busy one. A unit test that asks for a fixture of the real services
(tests/conftest.py) is refused at collection, naming the test and the fixture:
it belongs in tests/integration.
"""

from __future__ import annotations

from pathlib import Path

import pytest

UNIT_TIMEOUT = 30.0  # seconds
SERVICE_FIXTURES = frozenset({"database_url", "db", "amqp_url", "queue_prefix", "session_prefix", "keystone"})
HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not item.path.is_relative_to(HERE):
            continue
        services = SERVICE_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        if services:
            raise pytest.UsageError(
                f"{item.nodeid} is a unit test but uses {', '.join(sorted(services))}, "
                "a fixture of the real services: move it to tests/integration"
            )
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(UNIT_TIMEOUT))
