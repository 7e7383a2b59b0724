"""Test helpers for plugin tests: a virtual clock, an ActionContext builder and a
validator that cannot be pickled (a custom constraint plugin done wrong)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog

from shared.plugins import ActionContext


class VirtualClock:
    """A clock that moves only when the test says so."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


CtxFactory = Callable[..., ActionContext]


def context_factory(clock: VirtualClock) -> CtxFactory:
    """Build ActionContexts on `clock`; keyword arguments override the defaults."""

    def build(**overrides: Any) -> ActionContext:
        fields: dict[str, Any] = {
            "stack_id": "5f0c2d0e-stack",
            "stack_name": "demo",
            "project_id": "proj1",
            "resource_name": "thing",
            "idempotency_key": "job-1",
            "deadline": clock() + 600,
            "cancelled": asyncio.Event(),
            "log": structlog.get_logger("test"),
            "clock": clock,
        }
        fields.update(overrides)
        return ActionContext(**fields)

    return build


#: A constraint validator that cannot be pickled (a lambda: pickle finds no `<lambda>` here).
unpicklable_validator: Callable[[Any, Any], str | None] = lambda value, context: None  # noqa: E731
