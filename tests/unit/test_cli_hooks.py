"""`converge stack hook poll` lists the hooks reached and not cleared since (pure part)."""

from __future__ import annotations

from typing import Any

from services.cli.commands.hooks import pending_hooks


def event(resource: str, reason: str, stack: str = "s") -> dict[str, Any]:
    link = {"rel": "stack", "href": f"http://h/v1/p/stacks/{stack}/0b7f"}
    return {
        "resource_name": resource,
        "resource_type": "T",
        "resource_status_reason": reason,
        "links": [link],
    }


def test_a_hook_reached_is_pending_until_cleared_and_stacks_are_told_apart() -> None:
    events = [
        event("a", "CREATE paused until Hook pre-create is cleared"),
        event("b", "CREATE paused until Hook pre-create is cleared"),
        event("b", "Hook pre-create is cleared"),
        event("a", "CREATE paused until Hook pre-create is cleared", stack="child"),
        event("c", "state changed"),
    ]
    assert pending_hooks(events) == [
        {"resource_name": "a", "resource_type": "T", "hook": "pre-create", "stack_name": "s"},
        {"resource_name": "a", "resource_type": "T", "hook": "pre-create", "stack_name": "child"},
    ]


def test_a_hook_reached_again_after_it_was_cleared_is_pending_again() -> None:
    events = [
        event("a", "CREATE paused until Hook pre-create is cleared"),
        event("a", "Hook pre-create is cleared"),
        event("a", "UPDATE paused until Hook pre-update is cleared"),
    ]
    assert [h["hook"] for h in pending_hooks(events)] == ["pre-update"]
