"""Time and ids: what the engine's decisions read that is in neither a message nor a row.

Where it sits: `EngineService.from_settings` takes a `Clock` and an `Ids` (the
wall clock and random UUIDs unless a test or simulation passes its own) and
hands them, as fields of the one `EngineDeps` record (services/engine/deps.py),
to the parts that decide by time or make ids: the convergence shell
(job ids and deadlines, batch pauses, looks, wait conditions), the operations
and nested stacks (stack, template and traversal ids), healing, scaling,
signals, observation and recovery. The pure decisions of `core` take the
instant as a value (`now`). As in the worker (`shared.plugins.runtime`), a
clock is a function giving seconds since the epoch, so a test decides a
timeout or a cooldown on virtual time and a run can be replayed from its ids.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeAlias

from services.engine.core.model import StackId, TemplateId, TraversalId

#: Seconds since the epoch, as `time.time` gives them (deadlines cross processes).
Clock: TypeAlias = Callable[[], float]

WALL_CLOCK: Final[Clock] = time.time


@dataclass(frozen=True)
class Ids:
    """Where new ids come from (random UUIDs unless `new` says otherwise)."""

    new: Callable[[], uuid.UUID] = uuid.uuid4

    def stack(self) -> StackId:
        return StackId(self.new())

    def template(self) -> TemplateId:
        return TemplateId(self.new())

    def traversal(self) -> TraversalId:
        return TraversalId(self.new())

    def job(self) -> str:
        """A job's id (also a look's, after its prefix)."""
        return self.new().hex


RANDOM_IDS: Final = Ids()
