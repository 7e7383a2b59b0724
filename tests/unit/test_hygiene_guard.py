"""The leak guard (tests/support/hygiene.py) fails a test that leaves tasks or connections behind.

Real: pytest and pytest-asyncio, run in-process on small test files (pytester)
with the guard registered as tests/conftest.py registers it; real sockets on
127.0.0.1. Nothing is faked.
"""

from __future__ import annotations

import textwrap

import pytest

pytest_plugins = ["pytester"]

CONFTEST = """
from tests.support.hygiene import LeakGuard

def pytest_configure(config):
    config.pluginmanager.register(LeakGuard(grace={grace}), "converge-leak-guard")
"""

INI = """
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
asyncio_default_test_loop_scope = function
"""


def run(pytester: pytest.Pytester, source: str, *, grace: float = 0.2) -> pytest.RunResult:
    """Run `source` as a test file under the guard. A short `grace` where every task left
    is a leak (it could never end), so the guard need not wait long to say so."""
    pytester.makeconftest(CONFTEST.format(grace=grace))
    pytester.makeini(INI)
    pytester.makepyfile(test_subject=textwrap.dedent(source))
    return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")


def test_a_task_left_running_errors_the_test_naming_it(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        import asyncio

        STARTED = []  # held, as a background loop's task is: the loop keeps only a weak reference

        async def forever():
            await asyncio.Event().wait()

        async def test_forgets_its_task():
            STARTED.append(asyncio.get_running_loop().create_task(forever(), name="forgotten"))
        """,
    )
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*task 'forgotten' running forever*"])


def test_a_server_left_open_errors_the_test_naming_its_address(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        import asyncio

        async def test_leaves_its_server_open():
            await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        """,
    )
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*open server listening on 127.0.0.1:*"])


def test_a_connection_left_open_errors_the_test_naming_its_peer(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        import asyncio
        import pytest

        KEPT = []

        @pytest.fixture
        async def server():
            server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
            yield server.sockets[0].getsockname()[1]
            server.close()

        async def test_leaves_its_connection_open(server):
            KEPT.append(await asyncio.open_connection("127.0.0.1", server))
        """,
    )
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*open *Transport to 127.0.0.1:*"])


def test_what_fixtures_stop_in_their_teardown_and_tasks_about_to_end_pass(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        import asyncio
        import contextlib
        import pytest

        @pytest.fixture
        async def background():
            task = asyncio.get_running_loop().create_task(asyncio.Event().wait())
            server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
            yield server.sockets[0].getsockname()[1]
            server.close()
            await server.wait_closed()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

        async def almost_done():
            for _ in range(3):
                await asyncio.sleep(0)

        async def test_cleans_up(background):
            reader, writer = await asyncio.open_connection("127.0.0.1", background)
            writer.close()
            await writer.wait_closed()
            asyncio.get_running_loop().create_task(almost_done())

        def test_synchronous():
            assert asyncio.run(asyncio.sleep(0)) is None
        """,
        grace=30.0,  # the guard waits only as long as `almost_done` takes
    )
    result.assert_outcomes(passed=2)


def test_a_loop_shared_by_a_module_is_checked_after_its_last_test(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        import asyncio
        import pytest

        pytestmark = pytest.mark.asyncio(loop_scope="module")
        STARTED = []  # held, as a background loop's task is: the loop keeps only a weak reference

        async def test_first_forgets_a_task():
            STARTED.append(asyncio.get_running_loop().create_task(asyncio.Event().wait(), name="module-leak"))

        async def test_second_sees_the_loop_still_shared():
            assert any(t.get_name() == "module-leak" for t in asyncio.all_tasks())
        """,
    )
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_second_sees_the_loop_still_shared*"])
