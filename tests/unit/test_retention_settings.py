"""CONVERGE_MAX_EVENTS_PER_STACK and CONVERGE_MAX_SNAPSHOTS_PER_STACK reach the engine
(read once in main, passed down through its API limits), with Heat's defaults."""

from __future__ import annotations


def test_event_and_snapshot_caps_reach_the_engine_from_their_settings() -> None:
    from services.engine.settings_map import api_limits
    from shared.settings import EngineSettings

    limits = api_limits(EngineSettings(max_events_per_stack=7, max_snapshots_per_stack=3))
    assert (limits.events_per_stack, limits.snapshots_per_stack) == (7, 3)
    defaults = api_limits(EngineSettings())
    assert (defaults.events_per_stack, defaults.snapshots_per_stack) == (1000, 32), "Heat's defaults"
