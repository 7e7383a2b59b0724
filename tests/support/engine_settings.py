"""Engine settings written in a test, for the engines tests build in their own process.

Where it sits: the in-process harness (tests/support/convergence.py), the crash
harness and the test drivers of multi-process runs build their engine with
`EngineService.from_settings`, as `converge-engine` and `converge up` do, from
settings made here: the given values over the defaults, validated as the
environment's would be, with the environment itself ignored (a CONVERGE_*
variable in the shell that runs the tests changes no test).
"""

from __future__ import annotations

from typing import Any

import asyncpg
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from services.engine.service import EngineService
from services.engine.template import constraint_registry
from shared.bus import Bus
from shared.plugins.constraints import load_constraints
from shared.plugins.registry import load_types
from shared.settings import EngineSettings
from shared.tasks import Supervisor


class _WrittenInTest(EngineSettings):
    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


def engine_settings(**values: Any) -> EngineSettings:
    """`EngineSettings` with `values` (field names, e.g. `max_stacks_per_project=1`) over the defaults."""
    return _WrittenInTest(**values)


def idle_engine(pool: asyncpg.Pool, bus: Bus, *, settings: EngineSettings | None = None) -> EngineService:
    """A test's own engine core beside engines that run as processes: built as theirs are
    (from `settings`, default the defaults, with the types and custom constraints they
    load), never started, so it consumes nothing and runs no background loop; the test
    calls its `operations` (and `convergence`, e.g. `expire_overdue`). It holds no lease:
    outbox rows it writes are also published by the running engines' relay, which only
    duplicates messages their inbox drops."""
    return EngineService.from_settings(
        settings or engine_settings(),
        pool=pool,
        bus=bus,
        types=load_types(),
        constraints=constraint_registry(load_constraints()),
        supervisor=Supervisor(),
    )
