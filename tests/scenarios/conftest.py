"""Scenario fixtures: seeds to replay each scenario under (CONVERGE_TEST_SEEDS, default 20)."""

from __future__ import annotations

import os

import pytest


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "seed" in metafunc.fixturenames:
        count = int(os.environ.get("CONVERGE_TEST_SEEDS", "20"))
        metafunc.parametrize("seed", range(count))
