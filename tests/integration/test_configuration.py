"""A bad CONVERGE_* value stops a service at start: one line naming it, exit 2.

Real: the installed console scripts, run as processes.
"""

from __future__ import annotations

import pytest

from shared.settings import EngineSettings, WorkerSettings, describe_error
from tests.support.processes import run_script

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("script", "variable", "value"),
    [
        ("converge-engine", "CONVERGE_API_PORT", "eighty"),
        ("converge-engine", "CONVERGE_DATABASE_URL", "mysql://x"),
        ("converge-worker", "CONVERGE_LOG_FORMAT", "xml"),
        ("converge-worker", "CONVERGE_QUEUE_PREFIX", "has space"),
        ("converge-observer", "CONVERGE_AMQP_URL", "http://broker"),
        ("converge-observer", "CONVERGE_HEALTH_PORT", "70000"),
    ],
)
async def test_a_bad_value_gives_one_line_naming_the_variable_and_exit_2(
    script: str, variable: str, value: str
) -> None:
    code, output = await run_script([script], {variable: value})
    assert code == 2, output
    lines = output.strip().splitlines()
    assert len(lines) == 1, output
    assert lines[0].startswith(f"{script}: invalid configuration: {variable}=")
    assert value in lines[0]


async def test_a_separately_run_worker_needs_a_broker_url() -> None:
    code, output = await run_script(["converge-worker"], {"CONVERGE_AMQP_URL": ""})
    assert code == 2
    assert "CONVERGE_AMQP_URL is required" in output


def test_the_error_line_names_the_first_bad_field_and_counts_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CONVERGE_API_PORT", "0")
    monkeypatch.setenv("CONVERGE_DB_POOL_SIZE", "lots")
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as info:
        EngineSettings()
    line = describe_error(info.value, EngineSettings)
    assert line.startswith("invalid configuration: CONVERGE_")
    assert "(and 1 more)" in line


def test_defaults_are_usable_without_any_environment() -> None:
    settings = WorkerSettings()
    assert settings.queue_prefix == "converge"
    assert settings.health_port == 8005
