"""The sandbox service: the cloud with a clock, a build timer, metrics and notifications.

Where it sits: between the HTTP layer (app.py, which only parses requests
and renders answers) and the pure cloud (model.py). Every operation first
lets due builds finish, then acts, then hands the changes to the notifier
and updates the metrics — synchronously, so each request sees and leaves a
consistent cloud. A timer task (`run_timers`) finishes builds on time even
when nobody is asking, so their status changes are announced promptly.
With a state file (state.py) every change is also saved, and `durable`
returns once it is on disk (the HTTP layer awaits it before answering);
`build_sandbox` restores the cloud the file holds. Hosted by
`converge-sandbox` (main.py) and by `converge up` alike.

It also keeps the servers' loads and the alarms on them (`alarms.py`; the
alarms in the state file too): a
task (`run_alarms`) evaluates each alarm every `period` seconds and sends the
POSTs it decides through the allow-listed HTTP gateway (only to the hosts of
`alarm_hosts`, checked again when an alarm is created).
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge

from services.sandbox.agent import Agent, Agents
from services.sandbox.alarms import Alarms, Post, evaluate, parse_alarm, parse_load
from services.sandbox.model import Change, Cloud, Created
from services.sandbox.notify import Notifier, NotifierMetrics
from services.sandbox.records import resource_record
from services.sandbox.specs import Kind
from services.sandbox.state import StateFile, StateWrite
from shared.bus import Bus
from shared.errors import ConvergeError, InvalidInput
from shared.http_client import AllowList, HttpGateway, check_url
from shared.notifications import NotificationEvent
from shared.settings import SandboxBehaviour
from shared.tasks import Supervisor

log = structlog.get_logger(__name__)


class SandboxMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        def per_kind(name: str, text: str) -> Counter:
            return Counter(name, text, ["kind"], registry=registry)

        self.creates = per_kind("converge_sandbox_creates", "Resources created, by kind.")
        self.replays = per_kind(
            "converge_sandbox_idempotent_replays",
            "Creates answered with the resource an earlier request made (Idempotency-Key seen before).",
        )
        self.updates = per_kind(
            "converge_sandbox_updates", "In-place updates that changed something, by kind."
        )
        self.deletes = per_kind("converge_sandbox_deletes", "Resources deleted, by kind.")
        self.breaks = per_kind("converge_sandbox_breaks", "Resources put into ERROR out of band, by kind.")
        self.builds = Counter(
            "converge_sandbox_builds_finished",
            "Builds finished, by kind and resulting status (ACTIVE or ERROR).",
            ["kind", "status"],
            registry=registry,
        )
        self.refused = Counter(
            "converge_sandbox_refused", "Requests refused, by HTTP status.", ["status"], registry=registry
        )
        self.resources = Gauge(
            "converge_sandbox_resources", "Live resources, by kind.", ["kind"], registry=registry
        )
        for kind in Kind:
            self.resources.labels(kind.value).set(0)


class SandboxService:
    def __init__(
        self,
        *,
        cloud: Cloud,
        notifier: Notifier,
        metrics: SandboxMetrics,
        clock: Callable[[], float] = time.time,
        state: StateFile | None = None,
        alarm_hosts: AllowList | None = None,
        agents: Agents | None = None,
    ) -> None:
        self.agents = agents or Agents(poll_seconds=1.0)
        self._cloud = cloud
        self._alarms = Alarms()
        self._alarm_hosts = alarm_hosts if alarm_hosts is not None else AllowList()  # none allowed
        self._alarm_wake = asyncio.Event()
        self._notifier = notifier
        self.metrics = metrics
        self._clock = clock
        self._state = state
        self._wake = asyncio.Event()
        for kind in Kind:
            metrics.resources.labels(kind.value).set(cloud.counts[kind])

    @property
    def notification_queue(self) -> str | None:
        return self._notifier.queue_name if self._notifier.enabled else None

    # -- operations (called by the HTTP layer) -------------------------------

    def create(self, kind: Kind, body: Any, *, idempotency_key: str | None) -> Created:
        now = self._tick()
        created = self._cloud.create(kind, body, now=now, idempotency_key=idempotency_key)
        (self.metrics.replays if created.replayed else self.metrics.creates).labels(kind.value).inc()
        learnt = (kind, idempotency_key) if idempotency_key and not created.replayed else None
        self._record(created.changes, key=learnt)
        return created

    def update(self, kind: Kind, resource_id: str, patch: Any) -> dict[str, Any]:
        now = self._tick()
        view, changes = self._cloud.update(kind, resource_id, patch, now=now)
        if changes:
            self.metrics.updates.labels(kind.value).inc()
        self._record(changes)
        return self._with_agent(view)

    def delete(self, kind: Kind, resource_id: str) -> None:
        now = self._tick()
        changes = self._cloud.delete(kind, resource_id, now=now)
        self.agents.forget(resource_id)
        self.metrics.deletes.labels(kind.value).inc()
        self._record(changes)

    def break_(self, kind: Kind, resource_id: str, reason: str) -> dict[str, Any]:
        now = self._tick()
        view, changes = self._cloud.break_(kind, resource_id, reason, now=now)
        self.metrics.breaks.labels(kind.value).inc()
        self._record(changes)
        return view

    def get(self, kind: Kind, resource_id: str) -> dict[str, Any]:
        self._tick()
        return self._with_agent(self._cloud.get(kind, resource_id))

    def set_agent(self, resource_id: str, body: Any) -> dict[str, Any]:
        """Give a server its configuration agent (`agent.py`): body {"api": <Converge's API
        base for the server's project>, "token": <the server's agent token>}."""
        self._tick()
        self._cloud.get(Kind.SERVER, resource_id)  # NotFound unless it is a server
        if not isinstance(body, dict):
            raise InvalidInput("an agent is a JSON object with api and token")
        api, token = body.get("api"), body.get("token")
        if not isinstance(api, str) or not api.startswith(("http://", "https://")) or len(api) > 2048:
            raise InvalidInput("must be an http(s) URL of at most 2048 characters", path="api")
        if not isinstance(token, str) or not 1 <= len(token) <= 255:
            raise InvalidInput("must be a string of 1 to 255 characters", path="token")
        try:
            self.agents.set(resource_id, Agent(api.rstrip("/"), token))
        except ValueError as exc:
            raise InvalidInput(str(exc), path="api") from exc
        res = self._cloud.resource(resource_id)
        assert res is not None  # found above
        res.agent = (api.rstrip("/"), token)
        if self._state is not None:  # kept with the server, so a restarted sandbox's agent polls on
            counters = {"created": self._cloud.created, "generation": self._cloud.generation}
            self._state.save(StateWrite({resource_id: resource_record(res)}, None, counters))
        return self.get(Kind.SERVER, resource_id)

    def _with_agent(self, view: dict[str, Any]) -> dict[str, Any]:
        agent = self.agents.get(str(view.get("id"))) if view.get("kind") == Kind.SERVER.value else None
        return view if agent is None else {**view, "agent_token": agent.token}

    def _active(self, resource_id: str) -> bool:
        res = self._cloud.resource(resource_id)
        return res is not None and res.status.value == "ACTIVE"

    def list_kind(self, kind: Kind) -> list[dict[str, Any]]:
        self._tick()
        return self._cloud.list_kind(kind)

    def inventory(self) -> list[dict[str, Any]]:
        self._tick()
        return self._cloud.inventory()

    @property
    def created(self) -> int:
        """Resources created since the cloud began (idempotent replays are not creates)."""
        return self._cloud.created

    # -- loads and alarms ---------------------------------------------------------

    def set_load(self, server_id: str, body: object) -> dict[str, object]:
        load = parse_load(body)
        self._cloud.get(Kind.SERVER, server_id)  # NotFound for an unknown server
        self._alarms.loads[server_id] = load
        return {"server": server_id, "load": load}

    def get_load(self, server_id: str) -> dict[str, object]:
        self._cloud.get(Kind.SERVER, server_id)
        return {"server": server_id, "load": self._alarms.loads.get(server_id, 0.0)}

    def create_alarm(self, body: object, *, idempotency_key: str | None = None) -> dict[str, object]:
        spec = parse_alarm(body)
        for field, actions in (("alarm_actions", spec.alarm_actions), ("ok_actions", spec.ok_actions)):
            for i, action in enumerate(actions):
                try:
                    check_url(self._alarm_hosts, action.url)
                except ConvergeError as exc:
                    raise InvalidInput(
                        f"{field}.{i}.url: {exc} (allowed: CONVERGE_SANDBOX_ALARM_HOSTS)", path="alarm"
                    ) from None
        before = len(self._alarms.alarms)
        alarm = self._alarms.add(uuid.uuid4().hex, spec, now=self._clock(), key=idempotency_key)
        if len(self._alarms.alarms) > before and self._state is not None:  # not a replay
            self._state.save(StateWrite({}, alarms={alarm.id: self._alarms.record(alarm.id)}))
        self._alarm_wake.set()
        return alarm.view()

    def list_alarms(self) -> list[dict[str, object]]:
        return [a.view() for a in self._alarms.alarms.values()]

    def get_alarm(self, alarm_id: str) -> dict[str, object]:
        return self._alarms.get(alarm_id).view()

    def delete_alarm(self, alarm_id: str) -> None:
        self._alarms.remove(alarm_id)
        if self._state is not None:
            self._state.save(StateWrite({}, alarms={alarm_id: None}))

    def restore_alarms(self, records: Sequence[Mapping[str, Any]]) -> None:
        self._alarms.restore(records, now=self._clock())

    def evaluate_alarms(self) -> list[Post]:
        """Evaluate the alarms that are due; the POSTs they decided."""
        now = self._tick()
        servers = self._cloud.list_kind(Kind.SERVER)
        self._alarms.forget_missing(str(s["id"]) for s in servers)
        posts: list[Post] = []
        for alarm in self._alarms.due(now):
            outcome = evaluate(alarm, servers, self._alarms.loads)
            if outcome.state != alarm.state:
                log.info("sandbox_alarm", alarm=alarm.id, state=outcome.state, average=outcome.average)
            alarm.state, alarm.average, alarm.members = outcome.state, outcome.average, outcome.members
            alarm.next_at = now + alarm.spec.period
            posts.extend(outcome.posts)
        return posts

    async def run_alarms(self, send: Callable[[Post], Awaitable[bool]] | None = None) -> None:
        """Evaluate alarms when due and send their POSTs, for ever (cancelled at shutdown).
        `send` delivers one POST (True: accepted); by default through the gateway."""
        async with aiohttp.ClientSession() as session:
            # No redirects: an alarm POSTs exactly the signal URL it was given.
            gateway = HttpGateway(session, self._alarm_hosts, max_redirects=0, default_timeout=10.0)
            deliver = send or (lambda post: _post(gateway, post))
            while True:
                self._alarm_wake.clear()
                for post in self.evaluate_alarms():
                    ok = await deliver(post)
                    alarm = self._alarms.alarms.get(post.alarm_id)
                    if alarm is not None:
                        alarm.sent += 1
                        alarm.failed += 0 if ok else 1
                due = self._alarms.next_due()
                timeout = None if due is None else max(0.0, due - self._clock())
                try:
                    async with asyncio.timeout(timeout):
                        await self._alarm_wake.wait()
                except TimeoutError:
                    pass

    # -- keeping the state -------------------------------------------------------

    async def durable(self) -> None:
        """Return once every change made so far is on disk (at once without a state file)."""
        if self._state is not None:
            await self._state.durable()

    async def close(self) -> None:
        """Write what is still queued and close the state file."""
        if self._state is not None:
            await self._state.close()

    def _save(self, changes: Sequence[Change], key: tuple[Kind, str] | None) -> None:
        if self._state is None or (not changes and key is None):
            return
        records: dict[str, dict[str, Any] | None] = {}
        for change in changes:
            res = self._cloud.resource(change.physical_id)
            records[change.physical_id] = resource_record(res) if res is not None else None
        learnt = self._cloud.key(*key) if key is not None else None
        counters = {"created": self._cloud.created, "generation": self._cloud.generation}
        self._state.save(StateWrite(records, learnt, counters))

    # -- time and bookkeeping --------------------------------------------------

    def _tick(self) -> float:
        """Finish the builds that are due; the current time."""
        now = self._clock()
        self._record(self._cloud.advance(now))
        return now

    def _record(self, changes: Sequence[Change], *, key: tuple[Kind, str] | None = None) -> None:
        self._save(changes, key)
        if not changes:
            return
        for change in changes:
            if change.event is NotificationEvent.STATUS_CHANGED and change.status in ("ACTIVE", "ERROR"):
                self.metrics.builds.labels(change.kind.value, change.status).inc()
            self.metrics.resources.labels(change.kind.value).set(self._cloud.counts[change.kind])
        self._notifier.send(changes)
        self._wake.set()  # a build may have started: the timer looks at its deadline

    async def run_timers(self) -> None:
        """Finish builds when they are due, for ever (cancelled at shutdown)."""
        while True:
            self._wake.clear()
            self._tick()
            due = self._cloud.next_due()
            timeout = None if due is None else max(0.0, due - self._clock())
            try:
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            except TimeoutError:
                pass

    def start(self, supervisor: Supervisor) -> None:
        supervisor.spawn("sandbox-timers", self.run_timers())
        supervisor.spawn("sandbox-alarms", self.run_alarms())
        supervisor.spawn("sandbox-agents", self.agents.run(self._active))
        if self._notifier.enabled:
            supervisor.spawn("sandbox-notifications", self._notifier.run())

    async def flush(self, *, seconds: float) -> None:
        """Let queued notifications go out (bounded), e.g. before shutting down."""
        await self._notifier.flush(seconds=seconds)


async def _post(gateway: HttpGateway, post: Post) -> bool:
    """POST one alarm action; whether it was accepted (a refusal or failure is logged)."""
    headers = {"X-Auth-Token": post.action.token} if post.action.token else {}
    try:
        answer = await gateway.request("POST", post.action.url, json=dict(post.body), headers=headers)
    except ConvergeError as exc:
        log.warning("sandbox_alarm_action_failed", alarm=post.alarm_id, url=post.action.url, error=str(exc))
        return False
    if not answer.ok:
        log.warning(
            "sandbox_alarm_action_refused", alarm=post.alarm_id, url=post.action.url, status=answer.status
        )
    return answer.ok


def build_sandbox(
    settings: SandboxBehaviour,
    *,
    bus: Bus | None,
    registry: CollectorRegistry,
    clock: Callable[[], float] = time.time,
    state: Path | None = None,
) -> SandboxService:
    """A sandbox as `settings` describe it, announcing its changes on `bus` (if any),
    keeping its state in the file `state` (if any) and restoring what that holds."""
    behaviour = {"latency": settings.sandbox_latency, "failure_rate": settings.sandbox_failure_rate}
    seed = settings.sandbox_seed
    state_file = StateFile.open(state) if state is not None else None
    saved = state_file.load() if state_file is not None else None
    if saved is None or not (saved.resources or saved.counters):
        cloud = Cloud(rng=random.Random(seed), **behaviour)
    else:
        created, generation = saved.counters.get("created", 0), saved.counters.get("generation", 0)
        # A seeded cloud must not draw the ids it drew before the restart again.
        rng = random.Random(f"{seed}:{created}:{generation}" if seed is not None else None)
        cloud = Cloud.restore(
            saved.resources, saved.keys, created=created, generation=generation, rng=rng, **behaviour
        )
        log.info("sandbox_restored", state=str(state), resources=len(saved.resources), created=cloud.created)
    notifier = Notifier(bus, metrics=NotifierMetrics(registry))
    metrics = SandboxMetrics(registry)
    agents = Agents(poll_seconds=settings.sandbox_agent_poll_seconds)
    for view in cloud.list_kind(Kind.SERVER):  # the agents of a restored cloud's servers
        res = cloud.resource(str(view["id"]))
        if res is not None and res.agent is not None:
            agents.set(res.id, Agent(*res.agent))
    service = SandboxService(
        cloud=cloud,
        notifier=notifier,
        metrics=metrics,
        clock=clock,
        state=state_file,
        alarm_hosts=AllowList.parse(settings.sandbox_alarm_hosts),
        agents=agents,
    )
    if saved is not None and saved.alarms:
        service.restore_alarms(saved.alarms)
    return service
