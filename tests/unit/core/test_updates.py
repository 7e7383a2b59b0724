"""What an update keeps of a stack, with Heat's meaning (PATCH merges, clear_parameters,
dropped parameters, tags/timeout/rollback). Pure."""

from __future__ import annotations

from services.engine.core.updates import (
    StackSettings,
    UpdateSettings,
    merge_environment,
    merge_registry,
    patched_parts,
    settings_after,
)


def test_a_patch_merges_parameter_defaults_per_name_as_heats_environment_load() -> None:
    merged = merge_environment(
        {"parameter_defaults": {"a": "PD", "b": 1}, "parameters": {"x": 1}},
        {"parameter_defaults": {"zz": 1, "b": 2}},
    )
    assert merged["parameter_defaults"] == {"a": "PD", "b": 2, "zz": 1}
    assert merged["parameters"] == {"x": 1}


def test_the_registry_merges_entry_by_entry_and_null_removes() -> None:
    base = {
        "My::A": "OS::Heat::None",
        "My::B": "OS::Heat::None",
        "Old::X": "a.yaml",
        "resources": {"web": {"hooks": "pre-create", "inner": {"hooks": "pre-update"}}},
    }
    new = {
        "My::A": "OS::Heat::Value",
        "Old::*": None,
        "resources": {"web": {"inner": {"hooks": "pre-delete"}}},
    }
    assert merge_registry(base, new) == {
        "My::A": "OS::Heat::Value",
        "My::B": "OS::Heat::None",
        "resources": {"web": {"hooks": "pre-create", "inner": {"hooks": "pre-delete"}}},
    }


def test_cleared_and_undeclared_parameters_are_dropped_and_new_values_win() -> None:
    environment, parameters = patched_parts(
        {"parameters": {"a": "envA", "gone": 1}, "parameter_defaults": {"d": 1}},
        {"a": "A1", "b": "B1", "c": "C1"},
        {"parameters": {"c": "envC"}},
        {"b": "B2"},
        cleared={"a"},
        declared={"a", "b", "c"},
    )
    assert environment["parameters"] == {"c": "envC"}
    assert parameters == {"b": "B2"}, "the environment's new c wins over the c an earlier request gave"
    assert environment["parameter_defaults"] == {"d": 1}


def test_tags_are_kept_by_a_patch_and_cleared_by_a_put_timeout_and_rollback_kept_unless_given() -> None:
    current = StackSettings(("t1",), 5, True)
    assert settings_after(UpdateSettings(), current, patch=True) == current
    assert settings_after(UpdateSettings(), current, patch=False) == StackSettings((), 5, True)
    given = UpdateSettings(tags=("t2", "t3"), timeout_mins=7, disable_rollback=False)
    assert settings_after(given, current, patch=False) == StackSettings(("t2", "t3"), 7, False)
