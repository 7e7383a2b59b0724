"""A message's log context is bound while it is handled and undone after it.

`shared.logging.log_context` binds fields to every line logged inside it (what
`structlog.contextvars.bound_contextvars` does, at a fraction of the cost) and puts
back exactly what was bound before, nested or not, whatever ended the block.
"""

from __future__ import annotations

import asyncio

import pytest
import structlog
from structlog.contextvars import bind_contextvars, get_contextvars, unbind_contextvars

from shared.logging import log_context


@pytest.fixture(autouse=True)
def _clean_context() -> None:
    structlog.contextvars.clear_contextvars()


def test_fields_are_bound_inside_and_gone_after() -> None:
    with log_context(stack_id="s1", job_id="j1"):
        assert get_contextvars() == {"stack_id": "s1", "job_id": "j1"}
    assert get_contextvars() == {}


def test_a_nested_context_restores_the_outer_values_and_leaves_other_keys_alone() -> None:
    bind_contextvars(service="engine")
    with log_context(stack_id="outer"):
        with log_context(stack_id="inner", resource="r1"):
            assert get_contextvars() == {"service": "engine", "stack_id": "inner", "resource": "r1"}
        assert get_contextvars() == {"service": "engine", "stack_id": "outer"}
    assert get_contextvars() == {"service": "engine"}


def test_the_context_is_undone_when_the_block_raises() -> None:
    with pytest.raises(RuntimeError), log_context(stack_id="s1"):
        raise RuntimeError("handling failed")
    assert get_contextvars() == {}


def test_a_key_unbound_inside_is_put_back_as_it_was() -> None:
    bind_contextvars(stack_id="before")
    with log_context(stack_id="during"):
        unbind_contextvars("stack_id")
    assert get_contextvars() == {"stack_id": "before"}


async def test_tasks_started_inside_carry_the_context_and_do_not_leak_it_back() -> None:
    seen: dict[str, object] = {}

    async def child() -> None:
        seen.update(get_contextvars())
        bind_contextvars(resource="set-by-child")

    with log_context(message_id="m1"):
        await asyncio.create_task(child())
        assert get_contextvars() == {"message_id": "m1"}
    assert seen == {"message_id": "m1"}
    assert get_contextvars() == {}


def test_every_line_logged_inside_carries_the_fields() -> None:
    with structlog.testing.capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
        with log_context(stack_id="s1"):
            structlog.get_logger().info("inside")
        structlog.get_logger().info("outside")
    assert [(e["event"], e.get("stack_id")) for e in logs] == [("inside", "s1"), ("outside", None)]
