"""Fixtures shared by every test: real PostgreSQL and RabbitMQ, isolated.

Each test session gets its own database (dropped at the end) and queue
prefix (its queues and exchanges deleted at the end), so runs never see each
other. URLs come from CONVERGE_TEST_DATABASE_URL / CONVERGE_TEST_AMQP_URL,
which `make test` guarantees are reachable (tests/support/provide_services).
When the browser tests were skipped for want of Chromium, the run ends with
one line saying how to get it (tests/support/browser.py). An async test that
leaves tasks pending or connections open on its event loop errors at
teardown (tests/support/hygiene.py).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest

from tests.support import rabbit
from tests.support.browser import MISSING
from tests.support.databases import create_database, drop_database
from tests.support.hygiene import LeakGuard
from tests.support.keystone import keystone  # noqa: F401  (a session fixture: one real Keystone a run)

DB_URL = os.environ.get("CONVERGE_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
AMQP_URL = os.environ.get("CONVERGE_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
RUN_ID = uuid.uuid4().hex[:8]


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(LeakGuard(), "converge-leak-guard")


@pytest.fixture(scope="session")
def amqp_url() -> str:
    return AMQP_URL


@pytest.fixture(scope="session")
def session_prefix() -> Iterator[str]:
    prefix = f"ctest-{RUN_ID}"
    yield prefix
    rabbit.delete_by_prefix(AMQP_URL, prefix)


@pytest.fixture
def queue_prefix(session_prefix: str) -> Iterator[str]:
    """A queue prefix of this test's own; its queues are deleted when the test ends (what
    else carries the prefix goes at the end of the run)."""
    prefix = f"{session_prefix}-{uuid.uuid4().hex[:6]}"
    yield prefix
    rabbit.delete_test_queues(AMQP_URL, prefix)


@pytest.fixture
async def database_url() -> AsyncIterator[str]:
    """A fresh, empty database of this test's own (dropped afterwards)."""
    name = f"converge_test_{RUN_ID}_{uuid.uuid4().hex[:8]}"
    url = await create_database(DB_URL, name)
    yield url
    await drop_database(DB_URL, name)


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    yield conn
    await conn.close()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line saying how to get Chromium when the browser tests were skipped for want of it."""
    if any(MISSING in str(report.longrepr) for report in terminalreporter.stats.get("skipped", [])):
        terminalreporter.write_line(MISSING, yellow=True)
