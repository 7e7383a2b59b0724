"""How fast this machine runs plain Python right now: a yardstick printed beside figures.

Where it sits: `bench.__main__.machine` records it with every `make bench` report
and `bench.quick` measures it before each system it starts, so a figure read
against one from another hour comes with what the machine itself did meanwhile.
The same kind of VM has run the same code at half the speed an hour later
(docs/performance.md); a rate that fell with the yardstick is the machine, one
that fell alone is the code. It is no correction factor: the services also wait
on PostgreSQL, RabbitMQ and the disk, which the loop does not measure.
"""

from __future__ import annotations

import time

#: Additions per timed run; LOOP_ADDITIONS / CHUNK runs' best time is scaled to it.
LOOP_ADDITIONS = 10_000_000
CHUNK = 1_000_000
#: The loop as `python -c` runs it, at module level (its names in a dict, not a frame's
#: slots): the figure earlier closing notes and docs/performance.md quote.
_LOOP = compile("total = 0\nfor i in range(additions):\n    total += i\n", "<yardstick>", "exec")


def loop_seconds(*, tries: int = 3) -> float:
    """Seconds a plain Python loop of `LOOP_ADDITIONS` additions takes: the best of
    `tries` timed loops of `CHUNK`, scaled (a tenth of the time, less exposed to a
    neighbour's burst)."""
    best = float("inf")
    for _ in range(tries):
        namespace = {"additions": CHUNK}
        started = time.perf_counter()
        exec(_LOOP, namespace)  # a constant loop, compiled above
        best = min(best, time.perf_counter() - started)
    return round(best * LOOP_ADDITIONS / CHUNK, 3)
