"""Scenario fixtures: seeds to replay each scenario under (CONVERGE_TEST_SEEDS, default 6;
`make test-long` runs 200)."""

from __future__ import annotations

import os

import pytest


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "seed" in metafunc.fixturenames:
        count = int(os.environ.get("CONVERGE_TEST_SEEDS", "6"))
        metafunc.parametrize("seed", range(count))
