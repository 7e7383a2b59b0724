"""`eventually` (tests/support/waiting.py): the first truthy result, or an error saying what never held.

Real: the asyncio loop and its clock; the probes are plain functions.
"""

from __future__ import annotations

import pytest

from tests.support.waiting import eventually


async def test_the_first_truthy_result_of_a_sync_or_async_probe_is_returned() -> None:
    calls: list[int] = []

    def sync_probe() -> list[int] | None:
        calls.append(len(calls))
        return list(calls) if len(calls) == 3 else None

    async def async_probe() -> str:
        return "ready"

    assert await eventually(sync_probe, every=0) == [0, 1, 2]
    assert await eventually(async_probe) == "ready"


async def test_a_condition_that_never_holds_fails_naming_it_and_its_last_result() -> None:
    def waiting_messages() -> list[str]:
        return []

    with pytest.raises(AssertionError, match=r"^the queue drained did not hold within 0.05 s \(last: \[\]\)"):
        await eventually(waiting_messages, timeout=0.05, what="the queue drained")
    with pytest.raises(AssertionError, match=r"waiting_messages did not hold"):
        await eventually(waiting_messages, timeout=0.05)


async def test_an_error_of_the_probe_ends_the_wait_as_it_is() -> None:
    async def broken() -> bool:
        raise TimeoutError("the probe's own")

    with pytest.raises(TimeoutError, match="the probe's own"):
        await eventually(broken, timeout=30)
