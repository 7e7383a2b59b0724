"""The engine's long-running parts, independent of how the process hosts them.

`EngineService` registers this engine and keeps its heartbeat, consumes the
`engine` queue (node checks and job results, see `convergence`), relays outbox
messages left behind by a failed publish or a dead engine, and offers the
stack operations (`operations`). `converge-engine` and `converge up` both
host it, and both build it the one way the test harnesses do too:
`EngineService.from_settings(settings, ...)`, which turns `EngineSettings`
into the records its parts receive (services/engine/settings_map.py), so a
setting reaches the engine whichever way it runs. Every period and age below
is one of those settings (`EngineTuning`).

Work a dead engine held is taken over without it: its unacknowledged messages
return to the queue when its connection drops, and its committed but
unpublished outbox rows are relayed by any live engine at once (its lease is
gone). A live engine's relay publishes its own rows `outbox_stale_seconds` old
that its fast path is not publishing (checked every `outbox_relay_seconds`);
another engine's relay takes them only once they are much older
(`outbox.LIVE_WRITER_GRACE`). A database outage holds the messages being handled (they
wait for the database and are retried) instead of spending their deliveries,
so an outage never dead-letters work.

Work whose messages are gone (the in-process bus of a process that died, a
purged or dead-lettered message) is found from the database alone and sent
again (`recovery`): at start-up and every `stall_check_seconds`, a stack that
nothing moved for `stall_seconds` is reported (event, log, metric) and its
work in flight sent again; with `recover_at_start` (the in-process bus, where
nothing can be in flight when the process starts) all work in flight is sent
again once the lease is held.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import os
import random
import socket
import uuid
from collections.abc import Callable, Mapping

import structlog
from prometheus_client import CollectorRegistry

from services.engine.api.deps import READS_PER_PROJECT, ApiDeps, ApiLimits, ReadSlots
from services.engine.api.masking import SecretsCache
from services.engine.batching import Batches
from services.engine.conflicts import retry_conflicts
from services.engine.convergence import Convergence
from services.engine.core.healing import HealPolicy
from services.engine.core.quotas import Quotas
from services.engine.core.sources import RANDOM_IDS, WALL_CLOCK, Clock, Ids
from services.engine.deployments import DEFAULT_API_URL
from services.engine.deps import EngineDeps
from services.engine.healing import Healing
from services.engine.messages import CheckResource, StartTraversal
from services.engine.nested.messages import CancelNested, NestedStackJob
from services.engine.observation import Observing
from services.engine.operations import Operations
from services.engine.outbox import Outbox
from services.engine.recovery import Recovery
from services.engine.retention import EventRetention
from services.engine.scaling import Scaler
from services.engine.settings_map import (
    EngineTuning,
    api_limits,
    engine_tuning,
    heal_policy,
    public_url,
    quotas,
    template_limits,
)
from services.engine.signals import Signals
from services.engine.snapshots import Snapshots
from services.engine.store import Pool, Store
from services.engine.store.lease import EngineLease
from services.engine.store.queries import Queries
from services.engine.store.retention import EventPurge
from services.engine.template import DEFAULT_CONSTRAINTS, CustomConstraints, TemplateLimits
from services.engine.template_pool import INLINE, TemplateRunner
from shared.bus import Bus, Delivery
from shared.errors import ConflictError, StoreUnavailable
from shared.host import Consumption
from shared.messages import Codec, Message
from shared.plugins import ResourceType
from shared.protocol import ENGINE_QUEUE, JobResult, ResourceChanged, ResourceObserved
from shared.settings import EngineSettings
from shared.tasks import Supervisor

log = structlog.get_logger(__name__)

#: What the engine queue carries.
ENGINE_CODEC = Codec(
    [
        CheckResource,
        JobResult,
        ResourceObserved,
        ResourceChanged,
        NestedStackJob,
        CancelNested,
        StartTraversal,
    ]
)


class EngineService:
    def __init__(
        self,
        *,
        pool: Pool,
        bus: Bus,
        types: Mapping[str, type[ResourceType]],
        engine_id: uuid.UUID,
        supervisor: Supervisor,
        tuning: EngineTuning,
        limits: TemplateLimits,
        quotas: Quotas,
        api_limits: ApiLimits,
        heal: HealPolicy,
        templates: TemplateRunner = INLINE,
        constraints: CustomConstraints = DEFAULT_CONSTRAINTS,
        recover_at_start: bool = False,
        registry: CollectorRegistry | None = None,
        clock: Clock = WALL_CLOCK,
        ids: Ids = RANDOM_IDS,
        draw: Callable[[], float] = random.random,
        public_api_url: str = DEFAULT_API_URL,
    ) -> None:
        """Hosts build it with `from_settings`; the records here are what its settings
        become (services/engine/settings_map.py). `constraints`: the custom constraints
        parameters may name (`constraint_registry` of what
        `shared.plugins.constraints.load_constraints` found)."""
        self.tuning = tuning
        self.constraints = constraints
        self._api_limits = api_limits
        self._pool_size = pool.get_max_size()
        self._clock = clock
        self._ids = ids
        self._stall_check_seconds = tuning.stall_check_seconds
        self._recover_at_start = recover_at_start
        self.store = Store(pool, engine_id=engine_id)
        self.lease = EngineLease(pool, engine_id, check_every=tuning.heartbeat_seconds)
        self.bus = bus
        self.engine_id = engine_id
        self.outbox = Outbox(pool=pool, bus=bus, stale_after=tuning.outbox_stale_seconds, engine_id=engine_id)
        self._relay_seconds = tuning.relay_seconds
        self._store_retries = tuning.store_retries
        self._conflicts = tuning.conflicts
        self._draw = draw  # uniform in [0, 1): the jitter of conflict pauses
        self.types = types
        self.limits = limits
        self.templates = templates
        self.deps = deps = EngineDeps.build(
            store=self.store,
            outbox=self.outbox,
            types=types,
            limits=limits,
            quotas=quotas,
            templates=templates,
            constraints=constraints,
            config_bytes=api_limits.config_bytes,
            api_url=public_api_url,
            clock=clock,
            ids=ids,
        )
        self.definitions = deps.definitions
        self.queries = Queries(pool)
        self.operations = Operations(deps)
        self.convergence = Convergence(deps, follow_on=tuning.batches.follow_on)
        self._batch_policy = tuning.batches
        self._batches: Batches[CheckResource | JobResult] = Batches(
            self.convergence.handle_batch, tuning.batches, registry=registry
        )
        self.observing = Observing(deps)
        self.healing = Healing(deps, policy=heal)
        self.recovery = Recovery(
            store=self.store,
            outbox=self.outbox,
            stall_seconds=tuning.stall_seconds,
            registry=registry,
            clock=clock,
            deployment_wait_seconds=tuning.deployment_wait_seconds,
        )
        self.retention = EventRetention(EventPurge(pool), per_stack=api_limits.events_per_stack)
        self._event_purge_seconds = tuning.event_purge_seconds
        self._supervisor = supervisor
        self._prefetch = tuning.prefetch
        self._heartbeat_seconds = tuning.heartbeat_seconds

    @classmethod
    def from_settings(
        cls,
        settings: EngineSettings,
        *,
        pool: Pool,
        bus: Bus,
        types: Mapping[str, type[ResourceType]],
        supervisor: Supervisor,
        templates: TemplateRunner = INLINE,
        constraints: CustomConstraints = DEFAULT_CONSTRAINTS,
        recover_at_start: bool = False,
        registry: CollectorRegistry | None = None,
        engine_id: uuid.UUID | None = None,
        clock: Clock = WALL_CLOCK,
        ids: Ids = RANDOM_IDS,
        draw: Callable[[], float] = random.random,
    ) -> EngineService:
        """The engine as `settings` configure it: the one way every host builds it
        (`converge-engine`, `converge up`, the test harnesses). Besides the settings
        it takes what the host owns: the database pool, the bus, the resource types
        and custom constraints it loaded, the template pool it runs (`template_pool`;
        INLINE runs template work on the caller's thread), the supervisor of its
        tasks, the metrics registry; `recover_at_start` when the bus starts empty
        (the in-process one: all work in flight is sent again once the lease is
        held); `engine_id` (a fresh one by default); and the clock, the source of new
        ids and randomness (`core.sources`: real ones unless a test passes its own)."""
        return cls(
            pool=pool,
            bus=bus,
            types=types,
            engine_id=engine_id if engine_id is not None else ids.new(),
            supervisor=supervisor,
            tuning=engine_tuning(settings),
            limits=template_limits(settings),
            quotas=quotas(settings),
            api_limits=api_limits(settings),
            heal=heal_policy(settings),
            templates=templates,
            constraints=constraints,
            recover_at_start=recover_at_start,
            registry=registry,
            clock=clock,
            ids=ids,
            draw=draw,
            public_api_url=public_url(settings),
        )

    def api(self) -> ApiDeps:
        """What the HTTP API needs from this engine."""
        return ApiDeps(
            operations=self.operations,
            queries=self.queries,
            store=self.store,
            definitions=self.definitions,
            types=self.types,
            limits=self.limits,
            signals=Signals(
                store=self.store,
                outbox=self.outbox,
                per_handle=self._api_limits.signals_per_handle,
                reason_chars=self._api_limits.signal_reason_chars,
                gates=self.convergence.gates,
                scaler=Scaler(children=self.convergence.children, clock=self._clock),
                clock=self._clock,
            ),
            observing=self.observing,
            snapshots=Snapshots(
                store=self.store,
                outbox=self.outbox,
                operations=self.operations,
                answers=self.deps.answers,
                types=self.types,
                per_stack=self._api_limits.snapshots_per_stack,
                ids=self._ids,
            ),
            templates=self.templates,
            api_limits=self._api_limits,
            constraints=self.constraints,
            secrets=SecretsCache(self.queries),
            reads=ReadSlots(max(1, min(READS_PER_PROJECT, self._pool_size // 2))),
        )

    def consumptions(self) -> list[Consumption]:
        return [Consumption(ENGINE_QUEUE, self.handle, prefetch=self._prefetch, codec=ENGINE_CODEC)]

    async def handle(self, message: Message, delivery: Delivery) -> None:
        """Handle one engine message, riding out a database outage: the message stays
        with this engine (unacknowledged) while it waits for the database, then is
        handled again. Only `store_retries` failures with the database reachable
        count as a failed delivery. A conflict (another handler changed the rows
        first) is handled again here too, after a jittered pause (`conflicts`),
        and spends a delivery only once it outlasts every attempt.

        Node checks and job results go in batches first (`batching`); one whose
        batch failed is handled alone, as any other message."""
        if (
            isinstance(message, CheckResource | JobResult)
            and self._batches.serving
            and await self._batches.submit(message)
        ):
            return
        for attempt in itertools.count(1):
            try:
                await retry_conflicts(
                    lambda: self._route(message, delivery),
                    policy=self._conflicts,
                    sleep=asyncio.sleep,
                    random=self._draw,
                )
                return
            except StoreUnavailable as exc:
                if attempt > self._store_retries:
                    raise
                log.warning("store_unavailable_handling", error=str(exc), attempt=attempt)
                await self._store_back()

    async def _route(self, message: Message, delivery: Delivery) -> None:
        if isinstance(message, ResourceObserved) and message.gate_node is not None:
            await self.convergence.gates.observed(message)  # an update's look (converge)
        elif isinstance(message, ResourceObserved):
            await self.observing.handle(message)
        elif isinstance(message, ResourceChanged):
            await self.observing.changed(message)
        else:
            await self.convergence.handle(message, delivery)

    async def _store_back(self, *, first: float = 0.1, cap: float = 2.0) -> None:
        """Return once the database answers again (pausing longer while it does not)."""
        pause = first
        while not await self.store.ping():
            await asyncio.sleep(pause)
            pause = min(cap, pause * 2)

    async def start(self) -> None:
        tuning = self.tuning
        log.info("engine_tuning", engine_id=str(self.engine_id), **dataclasses.asdict(tuning))
        await self.store.register_engine(self.engine_id, hostname=socket.gethostname(), pid=os.getpid())
        self._supervisor.spawn("engine-lease", self.lease.hold())
        try:  # rows written before the lease is held look like a dead engine's
            await asyncio.wait_for(self.lease.held.wait(), timeout=tuning.lease_wait_seconds)
        except TimeoutError:
            log.warning("engine_lease_not_held_yet")
        if self._recover_at_start:
            await self._recover_everything()
        if self._batch_policy.size > 1:
            for runner in range(self._batch_policy.concurrency):
                self._supervisor.spawn(f"engine-batches-{runner}", self._batches.serve())
        self._supervisor.spawn("engine-heartbeat", self._heartbeat())
        self._supervisor.spawn("outbox-relay", self.outbox.relay_forever(every=self._relay_seconds))
        self._supervisor.spawn("janitor", self._janitor(every=tuning.prune_seconds))
        self._supervisor.spawn("timeouts", self._timeouts(every=tuning.timeout_scan_seconds))
        self._supervisor.spawn("recovery", self._recovery())
        self._supervisor.spawn(
            "observation-rounds", self._observation_rounds(every=tuning.observation_scan_seconds)
        )
        self._supervisor.spawn("event-retention", self._event_retention())

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self._heartbeat_seconds)
            try:
                await self.store.heartbeat(self.engine_id)
            except StoreUnavailable as exc:
                log.warning("heartbeat_failed", error=str(exc))

    async def _recover_everything(self, *, attempts: int = 5) -> None:
        """Send again all work in flight (nothing can be in flight at start-up on the
        in-process bus); a conflict with a request already being served is retried."""
        for attempt in itertools.count(1):
            try:
                stacks = await self.recovery.recover_everything()
            except ConflictError as exc:
                if attempt >= attempts:
                    raise
                log.warning("recovery_conflict", error=str(exc), attempt=attempt)
                continue
            log.info("recovered_at_start", stacks=stacks)
            return

    async def _timeouts(self, *, every: float) -> None:
        """Stacks never sit IN_PROGRESS past their timeout, message or no message; a
        group member's batch pause ends when it is due."""
        while True:
            await asyncio.sleep(every)
            try:
                await self.convergence.expire_overdue(now=self._clock())
                await self.convergence.gates.end_pauses(
                    now=self._clock()
                )  # due times: seconds since the epoch
            except (StoreUnavailable, ConflictError) as exc:
                log.warning("timeout_scan_failed", error=str(exc))

    async def _recovery(self) -> None:
        """At start-up and every `stall_check_seconds`: stacks nothing moves are moved."""
        while True:
            try:
                await self.report_stalled()
            except (StoreUnavailable, ConflictError) as exc:
                log.warning("recovery_scan_failed", error=str(exc))
            await asyncio.sleep(self._stall_check_seconds)

    async def _observation_rounds(self, *, every: float) -> None:
        """Close the observation rounds that are over (healing what they found), then
        start those that are due (stacks under observation)."""
        while True:
            await asyncio.sleep(every)
            try:
                await self.healing.close_due_rounds()
                await self.observing.start_due_rounds()
            except (StoreUnavailable, ConflictError) as exc:
                log.warning("observation_rounds_failed", error=str(exc))

    async def _event_retention(self) -> None:
        """Every `event_purge_seconds`: each stack that got events keeps its newest ones only."""
        while True:
            await asyncio.sleep(self._event_purge_seconds)
            try:
                await self.retention.sweep()
            except StoreUnavailable as exc:
                log.warning("event_purge_failed", error=str(exc))

    async def report_stalled(self) -> int:
        """Report each stack nothing moved for the stall time (an event naming what is
        still running and what was sent again) and send its work in flight again."""
        return await self.recovery.recover_stalled()

    async def _janitor(self, *, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            try:
                traversals, inbox = await self.store.prune(
                    inbox_seconds=self.tuning.inbox_keep_seconds,
                    traversal_seconds=self.tuning.traversal_keep_seconds,
                )
            except StoreUnavailable as exc:
                log.warning("prune_failed", error=str(exc))
                continue
            if traversals or inbox:
                log.info("pruned", traversals=traversals, inbox=inbox)

    async def stop(self) -> None:
        await self.operations.stop()
        try:
            await self.store.unregister_engine(self.engine_id)
        except StoreUnavailable as exc:
            log.warning("unregister_failed", error=str(exc))
