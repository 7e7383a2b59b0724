"""The benchmarks' machine yardstick (bench/harness/speed.py) and how bench-quick reads it.

Pure: the loop is run small, and the verdict beside a previous result is a function
of two numbers; no time is judged.
"""

from __future__ import annotations

from bench.harness import speed
from bench.quick import _verdict


def test_the_yardstick_times_a_loop_that_really_adds() -> None:
    namespace: dict[str, object] = {"additions": 1000}
    exec(speed._LOOP, namespace)
    assert namespace["total"] == sum(range(1000))
    assert speed.loop_seconds(tries=1) > 0


def test_a_slower_loop_is_read_as_the_machine_not_the_code() -> None:
    assert _verdict("machine loop", 1.6, 0.8) == "machine slower"
    assert _verdict("machine loop", 0.7, 0.8) == "machine faster"
    assert _verdict("create", 900.0, 1000.0) == "worse"  # a rate keeps its own verdict
