"""Sandbox alarms, pure: the average load of the matching ACTIVE servers against the
threshold, actions only on a change of state (or every time with repeat_actions), and
the limits on definitions and loads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from services.sandbox.alarms import (
    ALARM,
    INSUFFICIENT,
    OK,
    Alarm,
    Alarms,
    evaluate,
    parse_alarm,
    parse_load,
)
from services.sandbox.service import build_sandbox
from shared.errors import ConflictError, InvalidInput
from shared.settings import SandboxBehaviour

HOOK = {"url": "http://127.0.0.1:8004/v1/p/stacks/s/1/resources/up/signal", "token": "t"}


def server(sid: str, group: str = "web", status: str = "ACTIVE") -> dict[str, Any]:
    return {"id": sid, "status": status, "metadata": {"group": group}}


def alarm(**spec: Any) -> Alarm:
    body = {"threshold": 70, "matching_metadata": {"group": "web"}, "alarm_actions": [HOOK], **spec}
    return Alarm("a1", parse_alarm(body))


def test_the_average_of_matching_active_servers_decides_and_a_change_posts_once() -> None:
    watched = alarm(ok_actions=[HOOK])
    servers = [server("s1"), server("s2"), server("s3", group="db"), server("s4", status="BUILD")]
    loads = {"s1": 90.0, "s2": 80.0, "s3": 0.0, "s4": 0.0}
    first = evaluate(watched, servers, loads)
    assert (first.state, first.average, first.members) == (ALARM, 85.0, 2)
    assert [p.body["current"] for p in first.posts] == [ALARM]
    assert first.posts[0].body["previous"] == INSUFFICIENT
    watched.state = first.state
    assert evaluate(watched, servers, loads).posts == (), "no change, nothing sent"
    calmer = evaluate(watched, [*servers, server("s5")], loads)  # s5 has no load: 0
    assert (calmer.state, calmer.average) == (OK, 170 / 3)
    assert [p.body["current"] for p in calmer.posts] == [OK], "ok_actions on the way back"


def test_repeat_actions_posts_on_every_evaluation_and_no_server_is_insufficient_data() -> None:
    repeating = alarm(repeat_actions=True)
    repeating.state = ALARM
    assert len(evaluate(repeating, [server("s1")], {"s1": 99.0}).posts) == 1
    assert evaluate(repeating, [server("s1", group="db")], {}).state == INSUFFICIENT


def test_bad_definitions_and_loads_are_refused_naming_the_field() -> None:
    with pytest.raises(InvalidInput, match="comparison_operator"):
        parse_alarm({"threshold": 1, "comparison_operator": "eq"})
    with pytest.raises(InvalidInput, match="alarm_actions"):
        parse_alarm({"threshold": 1, "alarm_actions": [HOOK] * 6})
    with pytest.raises(InvalidInput, match=r"alarm_actions\.0\.url: .*only POSTs to a resource's signal URL"):
        parse_alarm({"threshold": 1, "alarm_actions": [{"url": "http://127.0.0.1:8005/admin/pause"}]})
    with pytest.raises(InvalidInput, match="load"):
        parse_load({"load": True})
    assert parse_load({"load": 42}) == 42.0
    kept = Alarms()
    for i in range(100):
        kept.add(str(i), parse_alarm({"threshold": 1}), now=0)
    with pytest.raises(ConflictError, match="at most 100 alarms"):
        kept.add("101", parse_alarm({"threshold": 1}), now=0)


def test_an_alarm_never_shows_its_actions_tokens() -> None:
    shown = alarm().view()
    assert shown["alarm_actions"] == [{"url": HOOK["url"], "token": "***"}]


def test_a_repeated_idempotency_key_gives_the_same_alarm_until_it_is_deleted() -> None:
    kept = Alarms()
    spec = parse_alarm({"threshold": 1})
    first = kept.add("a", spec, now=0, key="job-1")
    assert kept.add("b", spec, now=0, key="job-1") is first
    kept.remove("a")
    assert kept.add("c", spec, now=0, key="job-1").id == "c"


async def test_alarms_outlive_a_restart_of_a_sandbox_with_a_state_file(tmp_path: Path) -> None:
    settings = SandboxBehaviour(sandbox_latency=0)
    state = tmp_path / "sandbox.sqlite3"
    first = build_sandbox(settings, bus=None, registry=CollectorRegistry(), state=state)
    made = first.create_alarm({"threshold": 5, "alarm_actions": [HOOK]}, idempotency_key="job-1")
    gone = first.create_alarm({"threshold": 6})
    first.delete_alarm(str(gone["id"]))
    await first.durable()
    await first.close()

    again = build_sandbox(settings, bus=None, registry=CollectorRegistry(), state=state)
    try:
        assert [a["id"] for a in again.list_alarms()] == [made["id"]]
        assert again.get_alarm(str(made["id"]))["threshold"] == 5
        replay = again.create_alarm({"threshold": 5, "alarm_actions": [HOOK]}, idempotency_key="job-1")
        assert replay["id"] == made["id"], "the key that made it still answers it"
    finally:
        await again.close()
