"""Pausing Python's cyclic garbage collector around steps that allocate much and keep it.

Where it sits: an operation's start builds its graph (`traversal`: tens of thousands
of nodes for a large stack) and the engine unpickles definitions the template pool
made (`definitions`, `template_pool`); nearly everything they allocate survives.
Each time the survivors grow by a quarter of what the collector already tracks, it
walks the whole heap, and at 10k resources those full collections were 40% of an
update's start (docs/performance.md, issue 18). Such a step runs inside
`COLLECTOR.paused()`: memory is still freed by reference counting, and cycles wait
for the next collection after the pause. The collector is one per process, and so is
this: it counts holders across threads (the template pool unpickles in threads) and
nested pauses, and turns the collector back on when the last one ends, if it was on.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator


class CollectorPause:
    """Pauses the cyclic collector while any holder needs it paused."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._was_enabled = True

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        with self._lock:
            if self._holders == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._holders += 1
        try:
            yield
        finally:
            with self._lock:
                self._holders -= 1
                if self._holders == 0 and self._was_enabled:
                    gc.enable()


#: The process's one pause (the collector it pauses is the process's).
COLLECTOR = CollectorPause()
