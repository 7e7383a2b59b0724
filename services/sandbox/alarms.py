"""Sandbox metrics and alarms: a server's load, and a tiny threshold alarm on the average.

Where it sits: beside the cloud (`model.py`), owned by `SandboxService`, for
autoscaling demos without a monitoring service. A server is given a load
(`PUT /v1/servers/{id}/load`, a number 0..100, like a CPU utilisation); an
alarm (`POST /v1/alarms`) watches the average load of the ACTIVE servers whose
`metadata` holds every pair of its `matching_metadata` (as Aodh's alarms that
Heat's autoscaling templates use), a server with no load given counting as 0.
Every `period` seconds it compares that average with `threshold` by
`comparison_operator`; on a change to `alarm` it POSTs to each of its
`alarm_actions`, on a change back to `ok` to each of its `ok_actions` (with
`repeat_actions`, on every evaluation in that state), an Aodh-shaped body:
`{"alarm_id", "alarm_name", "current", "previous", "reason", "reason_data"}`.
An action is `{"url": ..., "token": ...}`: a scaling policy's `signal_url`
and `token` (sent as `X-Auth-Token`); a URL that is not a resource's signal URL
(`.../v1/<project>/stacks/<name>/<id>/resources/<resource>/signal`) is refused,
so an alarm cannot be made to POST anything else (say, a local admin endpoint).
With no matching ACTIVE server the alarm is `insufficient data` and does nothing.

This module is pure: the alarm definitions (`AlarmSpec`, validated, with
limits), the loads, and `evaluate` (an alarm's next state and the POSTs it
makes). The service runs the evaluations and sends the POSTs through the
allow-listed HTTP gateway (`CONVERGE_SANDBOX_ALARM_HOSTS`). Alarms are kept in
the sandbox's state file with its resources (a restarted sandbox has them,
their state evaluated afresh); loads are demo inputs, kept in memory only.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from shared.errors import ConflictError, InvalidInput, NotFound
from shared.plugins.base import Properties, prop

#: The most alarms one sandbox keeps, and actions one alarm has.
MAX_ALARMS = 100
MAX_ACTIONS = 5
#: The highest load a server may be given (a utilisation, in percent).
MAX_LOAD = 100.0

OK, ALARM, INSUFFICIENT = "ok", "alarm", "insufficient data"
_COMPARE: Mapping[str, Callable[[float, float], bool]] = {
    "gt": operator.gt,
    "ge": operator.ge,
    "lt": operator.lt,
    "le": operator.le,
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


#: The only URLs an alarm POSTs to: a resource's signal URL on a Heat-compatible API.
SIGNAL_PATH = re.compile(r"/v1/[^/]+/stacks/[^/]+/[^/]+/resources/[^/]+/signal")


def _signal_url(url: str) -> str:
    path = urlsplit(url).path
    if SIGNAL_PATH.search(path) is None or not path.endswith("/signal"):
        raise ValueError(
            "an alarm only POSTs to a resource's signal URL "
            "(.../v1/<project>/stacks/<name>/<id>/resources/<resource>/signal, e.g. a policy's signal_url)"
        )
    return url


class AlarmAction(_Strict):
    url: Annotated[str, AfterValidator(_signal_url)] = Field(
        min_length=1, max_length=2048, description="Where to POST (a policy's signal_url)."
    )
    token: str | None = Field(None, max_length=512, description="Sent as X-Auth-Token (the policy's token).")


class AlarmSpec(Properties):
    """An alarm's definition: the sandbox API's body, and Sandbox::Alarm's properties."""

    name: str = prop("", max_length=255, description="Display name.")
    threshold: float = prop(description="The average load compared with.")
    comparison_operator: Literal["gt", "ge", "lt", "le"] = prop(
        "gt", description="How the average is compared: average <op> threshold."
    )
    matching_metadata: dict[str, str] = prop(
        {}, max_length=20, description="Servers whose metadata holds all these pairs (empty: every server)."
    )
    period: float = prop(2.0, ge=0.5, le=3600, description="Seconds between evaluations.")
    alarm_actions: list[AlarmAction] = prop(
        [], max_length=MAX_ACTIONS, description="POSTed when the alarm turns to alarm: [{url, token}]."
    )
    ok_actions: list[AlarmAction] = prop(
        [], max_length=MAX_ACTIONS, description="POSTed when it turns back to ok: [{url, token}]."
    )
    repeat_actions: bool = prop(False, description="POST on every evaluation, not only on a change.")


def parse_alarm(body: Any) -> AlarmSpec:
    """An alarm definition from a request body; InvalidInput names the field."""
    if not isinstance(body, Mapping):
        raise InvalidInput("the body of an alarm must be a JSON object")
    try:
        return AlarmSpec.model_validate(dict(body))
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err["loc"]) or "alarm"
        raise InvalidInput(f"{where}: {err['msg']}", path="alarm") from exc


def parse_load(body: Any) -> float:
    """A server's load from `{"load": <0..100>}`."""
    value = body.get("load") if isinstance(body, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_LOAD:
        raise InvalidInput(f"load: a number from 0 to {MAX_LOAD:g} is required", path="load")
    return float(value)


@dataclass
class Alarm:
    id: str
    spec: AlarmSpec
    state: str = INSUFFICIENT
    average: float | None = None
    members: int = 0
    next_at: float = 0.0
    sent: int = 0  # actions POSTed
    failed: int = 0  # actions that could not be delivered or were refused

    def view(self) -> dict[str, Any]:
        shown = self.spec.model_dump(mode="json")
        for actions in (shown["alarm_actions"], shown["ok_actions"]):
            for action in actions:  # a token is a secret: shown only as whether there is one
                action["token"] = "***" if action["token"] else None
        return {
            "id": self.id,
            **shown,
            "state": self.state,
            "average": self.average,
            "servers": self.members,
            "actions_sent": self.sent,
            "actions_failed": self.failed,
        }


@dataclass(frozen=True)
class Post:
    """One action to send: POST `body` to `action.url`."""

    alarm_id: str
    action: AlarmAction
    body: Mapping[str, Any]


@dataclass(frozen=True)
class Evaluation:
    state: str
    average: float | None
    members: int
    posts: tuple[Post, ...] = ()


def matches(server: Mapping[str, Any], wanted: Mapping[str, str]) -> bool:
    metadata = server.get("metadata") or {}
    return server.get("status") == "ACTIVE" and all(metadata.get(k) == v for k, v in wanted.items())


def evaluate(alarm: Alarm, servers: Iterable[Mapping[str, Any]], loads: Mapping[str, float]) -> Evaluation:
    """The alarm's state from the servers (their API views) and their loads, and the
    actions a change of state (or `repeat_actions`) sends. Pure."""
    spec = alarm.spec
    values = [loads.get(str(s["id"]), 0.0) for s in servers if matches(s, spec.matching_metadata)]
    if not values:
        return Evaluation(INSUFFICIENT, None, 0)
    average = sum(values) / len(values)
    crossed = _COMPARE[spec.comparison_operator](average, spec.threshold)
    state = ALARM if crossed else OK
    if state == alarm.state and not spec.repeat_actions:
        return Evaluation(state, average, len(values))
    reason = (
        f"Transition to {state} due to {len(values)} servers averaging {average:g} "
        f"({spec.comparison_operator} {spec.threshold:g} is {'true' if crossed else 'false'})"
    )
    body = {
        "alarm_id": alarm.id,
        "alarm_name": spec.name,
        "current": state,
        "previous": alarm.state,
        "reason": reason,
        "reason_data": {
            "type": "threshold",
            "disposition": "outside" if crossed else "inside",
            "count": len(values),
            "most_recent": average,
        },
    }
    actions = spec.alarm_actions if state == ALARM else spec.ok_actions
    return Evaluation(state, average, len(values), tuple(Post(alarm.id, a, body) for a in actions))


@dataclass
class Alarms:
    """The sandbox's alarms and servers' loads (in memory)."""

    alarms: dict[str, Alarm] = field(default_factory=dict)
    loads: dict[str, float] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)  # Idempotency-Key -> the alarm it made

    def add(self, alarm_id: str, spec: AlarmSpec, *, now: float, key: str | None = None) -> Alarm:
        """A new alarm; with `key` seen before (and its alarm still there), that alarm."""
        made = self.alarms.get(self.keys.get(key, "")) if key else None
        if made is not None:
            return made
        if len(self.alarms) >= MAX_ALARMS:
            raise ConflictError(f"the sandbox keeps at most {MAX_ALARMS} alarms; delete one first")
        alarm = Alarm(alarm_id, spec, next_at=now)
        self.alarms[alarm_id] = alarm
        if key:
            self.keys[key] = alarm_id
        return alarm

    def get(self, alarm_id: str) -> Alarm:
        alarm = self.alarms.get(alarm_id)
        if alarm is None:
            raise NotFound(f"alarm {alarm_id} not found")
        return alarm

    def remove(self, alarm_id: str) -> None:
        self.get(alarm_id)
        del self.alarms[alarm_id]
        for key in [k for k, made in self.keys.items() if made == alarm_id]:
            del self.keys[key]

    def record(self, alarm_id: str) -> dict[str, Any]:
        """What the state file keeps of an alarm: its definition and the key that made it."""
        alarm = self.get(alarm_id)
        key = next((k for k, made in self.keys.items() if made == alarm_id), None)
        return {"id": alarm_id, "spec": alarm.spec.model_dump(mode="json"), "key": key}

    def restore(self, records: Iterable[Mapping[str, Any]], *, now: float) -> None:
        """Alarms from their records (at start-up); their state is evaluated afresh."""
        for record in records:
            alarm_id = str(record["id"])
            self.alarms[alarm_id] = Alarm(alarm_id, AlarmSpec.model_validate(record["spec"]), next_at=now)
            if record.get("key"):
                self.keys[str(record["key"])] = alarm_id

    def due(self, now: float) -> list[Alarm]:
        return [a for a in self.alarms.values() if a.next_at <= now]

    def next_due(self) -> float | None:
        return min((a.next_at for a in self.alarms.values()), default=None)

    def forget_missing(self, live: Iterable[str]) -> None:
        """Drop the loads of servers that no longer exist."""
        keep = set(live)
        for server_id in [s for s in self.loads if s not in keep]:
            del self.loads[server_id]
