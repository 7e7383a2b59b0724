"""Issue 18's targets as `make bench` reports them beside each figure (bench/throughput.py,
bench/baseline.py), and the CPU figures beside them (bench/harness/cpu.py).

Pure: rows are built from numbers given here; nothing is started and no time is judged.
"""

from __future__ import annotations

import pytest

from bench import baseline, throughput
from bench.harness.cpu import CpuUse, spent
from bench.harness.options import Options, row


def test_the_10k_layered_create_has_its_rate_target_in_each_mode() -> None:
    assert throughput._create_target("distributed", "layered", 10_000) == (">= 2000", 2000.0)
    assert throughput._create_target("up", "layered", 10_000) == (">= 3000", 3000.0)
    assert throughput._create_target("up", "chain", 10_000) == ("", None)
    assert throughput._create_target("up", "layered", 1_000) == ("", None)


def test_the_100k_layered_create_distributed_is_asked_to_take_under_a_minute() -> None:
    text, minimum = throughput._create_target("distributed", "layered", 100_000)
    assert minimum is not None
    assert round(minimum) == 1667
    assert "< 60 s" in text
    text, minimum = throughput._create_target("up", "layered", 100_000)  # the first suite's 3 minutes
    assert minimum is not None
    assert round(minimum) == 556
    assert "< 180 s" in text


def _rate(name: str, value: float | None) -> dict[str, object]:
    return row(name, value, "resources/s", mode="up", note="1.0 s")


def test_an_update_or_delete_is_held_to_the_rate_of_the_create_before_it() -> None:
    create = _rate("create layered 10k", 1000.0)
    slower = throughput._against_create(_rate("update layered 10k", 910.0), create)
    assert (slower["target"], slower["met"], slower["ratio_to_create"]) == (">= create", False, 0.91)
    assert "0.91x the create's 1000.0 res/s" in str(slower["note"])
    faster = throughput._against_create(_rate("delete layered 10k", 1500.0), create)
    assert faster["met"] is True
    failed = throughput._against_create(_rate("update layered 10k", None), create)
    assert failed["met"] is None
    assert failed["target"] == ">= create"


def test_without_a_baseline_checkout_the_rows_say_how_to_give_one() -> None:
    rows = baseline.run(Options(sizes=(10_000,), modes=("up", "distributed")))
    assert [(r["mode"], r["name"], r["value"]) for r in rows] == [
        ("up", "create layered 10k against the baseline", None),
        ("distributed", "create layered 10k against the baseline", None),
    ]
    assert rows[1]["target"] == ">= 10"
    assert all("--baseline DIR" in r["note"] for r in rows)


def test_the_ratio_to_the_baseline_is_of_the_medians_of_the_rounds() -> None:
    ours = [{"create": 1200.0, "update": 1000.0, "delete": 1500.0}, {"create": 1400.0, "update": 1100.0}]
    theirs = [
        {"create": 100.0, "update": 100.0, "delete": 150.0},
        {"create": 140.0, "update": 120.0, "delete": 170.0},
    ]
    rows = {r["name"]: r for r in baseline.ratio_rows("distributed", 10_000, ours, theirs, "fcd2258")}
    create = rows["create layered 10k against the baseline"]
    assert (create["value"], create["target"], create["met"]) == (10.83, ">= 10", True)
    assert create["note"].startswith("1300 against 120 res/s (fcd2258)")
    update = rows["update layered 10k against the baseline"]
    assert (update["value"], update["met"]) == (9.55, None)  # only the create has a target
    # the delete of one round did not complete: the median is of the rounds that did
    assert rows["delete layered 10k against the baseline"]["value"] == 9.38


def test_a_postgresql_that_stopped_between_the_snapshots_costs_nothing_rather_than_less() -> None:
    """Another test's embedded PostgreSQL ending mid-phase takes its processes' time out of
    the second sum: the phase's figure for that command is a lower bound, never negative."""
    before = CpuUse(services={"up": 1.0}, others={"postgres": 5.0, "beam.smp": 2.0})
    after = CpuUse(services={"up": 1.8}, others={"postgres": 3.5, "beam.smp": 2.3})
    used = spent(before, after)
    assert used["up"] == pytest.approx(0.8)
    assert used["postgres"] == 0.0
    assert used["beam.smp"] == pytest.approx(0.3)
