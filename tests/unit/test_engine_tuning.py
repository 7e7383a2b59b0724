"""Each engine tuning setting moves its own field of the engine's `EngineTuning`, and
conflict pauses that shrink are refused naming the variable.

Real: `EngineSettings` (validated as from the environment) and the pure mapping of
services/engine/settings_map.py that `EngineService.from_settings` uses. Which host
passes the settings on is proved in tests/integration/test_engine_settings.py.
"""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import ValidationError

from services.engine.batching import BatchPolicy
from services.engine.conflicts import ConflictPolicy
from services.engine.settings_map import EngineTuning, engine_tuning
from shared.settings import EngineSettings, describe_error
from tests.support.engine_settings import engine_settings

#: Every tuning setting, each at a value no default has.
SET = {
    "engine_prefetch": 3,
    "engine_batch_size": 5,
    "engine_batch_concurrency": 6,
    "engine_batch_follow_on": 9,
    "engine_batch_fill": 7,
    "engine_batch_linger_seconds": 0.05,
    "engine_heartbeat_seconds": 0.7,
    "engine_lease_wait_seconds": 4.0,
    "engine_store_retries": 2,
    "conflict_attempts": 4,
    "conflict_pause_seconds": 0.02,
    "conflict_max_pause_seconds": 0.3,
    "outbox_stale_seconds": 8.0,
    "outbox_relay_seconds": 0.4,
    "stall_seconds": 90.0,
    "stall_check_seconds": 3.0,
    "deployment_wait_seconds": 77.0,
    "timeout_scan_seconds": 0.6,
    "observation_scan_seconds": 0.15,
    "event_purge_seconds": 11.0,
    "prune_seconds": 13.0,
    "inbox_keep_seconds": 3600.0,
    "traversal_keep_seconds": 17.0,
}


def test_every_tuning_setting_reaches_its_field_of_the_engines_tuning() -> None:
    assert engine_tuning(engine_settings(**SET)) == EngineTuning(
        prefetch=3,
        batches=BatchPolicy(size=5, concurrency=6, follow_on=9, fill=7, linger=0.05),
        heartbeat_seconds=0.7,
        lease_wait_seconds=4.0,
        store_retries=2,
        conflicts=ConflictPolicy(attempts=4, first=0.02, cap=0.3),
        outbox_stale_seconds=8.0,
        relay_seconds=0.4,
        stall_seconds=90.0,
        stall_check_seconds=3.0,
        deployment_wait_seconds=77.0,
        timeout_scan_seconds=0.6,
        observation_scan_seconds=0.15,
        event_purge_seconds=11.0,
        prune_seconds=13.0,
        inbox_keep_seconds=3600.0,
        traversal_keep_seconds=17.0,
    )


def test_no_field_of_the_engines_tuning_is_fixed_in_code() -> None:
    """Every field differs between the defaults and `SET`: each comes from a setting."""
    default, tuned = engine_tuning(engine_settings()), engine_tuning(engine_settings(**SET))
    same = [
        f.name for f in dataclasses.fields(EngineTuning) if getattr(default, f.name) == getattr(tuned, f.name)
    ]
    assert same == []
    for record in ("conflicts", "batches"):
        policy = type(getattr(default, record))
        assert all(
            getattr(getattr(default, record), f.name) != getattr(getattr(tuned, record), f.name)
            for f in dataclasses.fields(policy)
        )


def test_a_longest_conflict_pause_below_the_first_is_refused_naming_the_variable() -> None:
    with pytest.raises(ValidationError) as info:
        engine_settings(conflict_pause_seconds=2.0, conflict_max_pause_seconds=1.0)
    line = describe_error(info.value, EngineSettings)
    assert line.startswith("invalid configuration: CONVERGE_CONFLICT_MAX_PAUSE_SECONDS=")
    assert "must be at least CONVERGE_CONFLICT_PAUSE_SECONDS (2.0)" in line
