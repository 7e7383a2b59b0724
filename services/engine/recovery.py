"""Recovery: work in flight that nothing is moving is sent again (async shell).

Where it sits: `EngineService` runs `recover_stalled` at start-up and every
`stall_check_seconds` afterwards, in every mode; with the in-process bus
(`converge up`), where nothing can be in flight when the process starts, it
first runs `recover_everything`, once its lease is held. Each batch of
stacks is one transaction: the stacks are locked (SKIP LOCKED, so one engine
recovers a given stack), their rows with a job in flight and the not-done
nodes of their current traversal are read, `core.recovery.plan` says what to
send, and the messages are committed to the outbox together with a stack
event saying what was sent and the time of the recovery
(`store/recovery.py`), then published.

What is sent may duplicate something that still exists (an outbox row a dead
engine left, which its relay publishes too; a message a broker still holds
when "nothing moving" was only slow): receivers make duplicates harmless. A
job carries the same job id, which is its idempotency key, and its result's
id derives from it (the inbox drops the second); a check of a done node
stops, one whose node's job is in flight stops, one that finds an older job
waits for it. docs/durability.md says more.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

import structlog
from prometheus_client import CollectorRegistry, Counter

from services.engine.configs import is_config_type
from services.engine.core.model import ResourceRow, StackId, StackRow, Status, resource_of
from services.engine.core.nesting import is_nested
from services.engine.core.recovery import JobInFlight, JobResend, Resend, plan, report
from services.engine.deployments import WAIT_SECONDS, is_deployment_type, wait_expired
from services.engine.effects import Effects
from services.engine.jobs import job_for
from services.engine.messages import StartTraversal
from services.engine.nested.messages import NestedStackJob
from services.engine.outbox import Outbox
from services.engine.signals import CONDITION, condition_result
from services.engine.store import Store
from services.engine.store.tx import Tx
from shared.protocol import ENGINE_QUEUE, JOBS_QUEUE, OBSERVE_QUEUE, ObserveRequest

log = structlog.get_logger(__name__)

BATCH = 50  # stacks per transaction


class Recovery:
    def __init__(
        self,
        *,
        store: Store,
        outbox: Outbox,
        stall_seconds: float,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.time,
        deployment_wait_seconds: float = WAIT_SECONDS,
    ) -> None:
        self._deployment_wait = deployment_wait_seconds
        self._store = store
        self._outbox = outbox
        self._stall_seconds = stall_seconds
        self._clock = clock
        registry = registry if registry is not None else CollectorRegistry()
        self._stalled = Counter(
            "converge_engine_stalled_stacks",
            "Reports of a stack in progress that made no progress for the stall time.",
            registry=registry,
        )
        self._sent = Counter(
            "converge_engine_recovered_messages",
            "Messages sent again by recovery, by kind (job, observe, nested_job, check, start).",
            ["kind"],
            registry=registry,
        )

    async def recover_everything(self) -> int:
        """Send again all work in flight, of every stack: what a process that starts
        with nothing in flight (the in-process bus) must do. The number of stacks.
        Observation rounds still waiting for looks are closed too: those looks died
        with the bus, and a round waiting out its deadline would hold healing back."""
        async with self._store.transaction() as tx:
            await tx.expire_open_rounds()
        return await self._sweep(stalled=False)

    async def recover_stalled(self) -> int:
        """Report and send again the work of the stacks nothing has moved for the stall
        time (see `RecoveryStatements.stalled_stacks`). The number of stacks."""
        return await self._sweep(stalled=True)

    async def _sweep(self, *, stalled: bool) -> int:
        after: StackId | None = None
        total = 0
        while True:
            now = self._clock()
            fx = Effects()
            async with self._store.transaction() as tx:
                if stalled:
                    ids = await tx.stalled_stacks(
                        seconds=self._stall_seconds, now=now, after=after, limit=BATCH
                    )
                else:
                    ids = await tx.busy_stacks(after=after, limit=BATCH)
                if not ids:
                    return total
                stale_before = datetime.fromtimestamp(now - self._stall_seconds, UTC) if stalled else None
                for stack_id in ids:
                    await self._stack(tx, stack_id, fx, stale_before=stale_before)
                await tx.mark_recovered(ids, now=now)
                message_ids = await fx.commit(tx)
            await self._outbox.publish(message_ids, fx.messages)
            total += len(ids)
            after = ids[-1]

    async def _stack(self, tx: Tx, stack_id: StackId, fx: Effects, *, stale_before: datetime | None) -> None:
        """Send again the work in flight of one stack. `stale_before` (periodic
        recovery): a stack not in progress only gets the jobs of rows unchanged since."""
        stack = await tx.stack(stack_id)
        if stack is None:
            return
        rows = await tx.resources(stack_id)
        facts = await tx.job_facts(stack_id)
        in_progress = stack.status is Status.IN_PROGRESS
        jobs: list[JobInFlight] = []
        for row in rows:
            fact = facts.get(row.resource_id)
            if row.current_job is None or fact is None:
                continue
            if stale_before is not None and not in_progress and fact.updated_at >= stale_before:
                continue  # heard from lately
            if is_deployment_type(row.type):  # waits for its server: failed once it waited too long
                waited = self._clock() - fact.updated_at.timestamp()
                if await wait_expired(
                    tx, stack.project_id, row, waited=waited, limit=self._deployment_wait, fx=fx
                ):
                    continue
            nested = is_nested(row.type)
            jobs.append(
                JobInFlight(
                    row,
                    observing=fact.observing_job == row.current_job,
                    nested=nested,
                    child_answers=nested and await _child_answers(tx, row),
                    signalled=row.type == CONDITION,
                )
            )
        traversal = stack.current_traversal if in_progress else None
        pending = await tx.pending_nodes(traversal) if traversal is not None else []
        starting = traversal is not None and await tx.graph_pending(traversal)
        decided = plan(traversal=traversal, pending=pending, jobs=jobs, graph_pending=starting)
        if decided.start:
            assert traversal is not None
            fx.emit(ENGINE_QUEUE, StartTraversal(stack_id=stack.stack_id, traversal_id=traversal))
        for job in decided.jobs:
            await self._send(tx, stack, job, fx)
        for node in decided.checks:
            assert traversal is not None
            fx.check(stack.stack_id, traversal, node, resource_of(node))
        counts = decided.counts()
        for kind, count in counts.items():
            self._sent.labels(kind).inc(count)
        stalled_for = self._stall_seconds if stale_before is not None else None
        if in_progress:
            running = sorted({r.name for r in rows if r.status is Status.IN_PROGRESS})
            if stalled_for is not None:
                self._stalled.inc()
                log.warning("stack_stalled", stack_id=str(stack_id), running=running)
            if stalled_for is not None or counts:
                reason = report(counts, stalled_seconds=stalled_for, running=running)
                fx.stack_event(stack, stack.action.value, "IN_PROGRESS", reason)
        log.info("work_sent_again", stack_id=str(stack_id), status=stack.status.value, **counts)

    async def _send(self, tx: Tx, stack: StackRow, job: JobResend, fx: Effects) -> None:
        row = job.row
        if job.kind is Resend.NOTHING:
            return
        if job.action is None or row.current_job is None or row.traversal_id is None:
            log.warning("job_not_sent_again", resource=row.name, action=row.action.value)
            return
        if job.kind is Resend.NESTED_JOB:
            nested = NestedStackJob(
                job_id=row.current_job, stack_id=row.stack_id, resource_id=row.resource_id, action=job.action
            )
            fx.emit(ENGINE_QUEUE, nested)
            return
        observing = job.kind is Resend.OBSERVE
        resource_job = job_for(
            stack,
            row,
            job_id=row.current_job,
            traversal=row.traversal_id,
            action=job.action,
            type_name=row.type,
            physical_id=row.physical_id,
            properties=row.job_properties or {},
            now=self._clock(),
            previous=None if observing else row.properties,
        )
        if not observing:
            if is_config_type(row.type):  # its result went out with the job's own transaction
                log.info("config_job_not_sent_again", resource=row.name, job_id=row.current_job)
                return
            fx.emit(JOBS_QUEUE, resource_job)
            return
        fx.emit(OBSERVE_QUEUE, ObserveRequest(job=resource_job))
        if job.settle:
            await self._settle(tx, row, fx)

    async def _settle(self, tx: Tx, row: ResourceRow, fx: Effects) -> None:
        """A wait condition's signals may have decided it while its outcome was lost."""
        handle_ref = (row.job_properties or {}).get("handle")
        if not isinstance(handle_ref, str):
            return
        handle = await tx.resource_by_physical_id(row.stack_id, handle_ref)
        result = condition_result(row, handle, now=self._clock()) if handle is not None else None
        if result is not None:
            fx.emit(ENGINE_QUEUE, result)


async def _child_answers(tx: Tx, row: ResourceRow) -> bool:
    """Whether the child stack of a nested row is working on the row's job now."""
    if row.physical_id is None:
        return False
    try:
        child_id = StackId(uuid.UUID(row.physical_id))
    except ValueError:
        return False
    child = await tx.stack(child_id)
    return child is not None and child.owner_job_id == row.current_job and child.status is Status.IN_PROGRESS
