"""Publishing the sandbox's changes as `ProviderNotification`s, off the request path.

Where it sits: `SandboxService` hands every `Change` the cloud reports to
`Notifier.send`, which never waits: it queues the change in memory (bounded
by `capacity`; a full queue drops the change and logs it). One publisher
task (`run`) sends them in order to `notifications.sandbox`, each publish
bounded by `publish_timeout`; a publish that fails or times out is logged,
counted and skipped. Notifications are hints (the sandbox's API is the
truth), so losing one under a broken bus is acceptable; blocking or failing
the cloud's API because of the bus is not. Without a bus nothing is sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import structlog
from prometheus_client import CollectorRegistry, Counter

from services.sandbox.model import Change
from shared.bus import Bus
from shared.errors import BusError
from shared.notifications import ProviderNotification, notification_queue

log = structlog.get_logger(__name__)

PROVIDER = "sandbox"


class NotifierMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.notifications = Counter(
            "converge_sandbox_notifications",
            "Change notifications by outcome: published, failed (bus error, timeout), dropped (queue full).",
            ["outcome"],
            registry=registry,
        )


def notification(change: Change) -> ProviderNotification:
    """The message announcing `change` (a new message id every time)."""
    return ProviderNotification(
        provider=PROVIDER,
        resource_kind=change.kind.value,
        physical_id=change.physical_id,
        event=change.event,
        status=change.status,
        properties=dict(change.properties),
        reason=change.reason,
        occurred_at=change.at,
    )


class Notifier:
    def __init__(
        self,
        bus: Bus | None,
        *,
        metrics: NotifierMetrics,
        capacity: int = 10_000,
        publish_timeout: float = 10.0,
    ) -> None:
        self._bus = bus
        self._metrics = metrics
        self._queue: asyncio.Queue[Change] = asyncio.Queue(maxsize=capacity)
        self._publish_timeout = publish_timeout
        self.queue_name = notification_queue(PROVIDER)

    @property
    def enabled(self) -> bool:
        return self._bus is not None

    def send(self, changes: Iterable[Change]) -> None:
        """Queue `changes` for publishing; never waits."""
        if self._bus is None:
            return
        for change in changes:
            try:
                self._queue.put_nowait(change)
            except asyncio.QueueFull:
                self._metrics.notifications.labels("dropped").inc()
                log.warning(
                    "notification_dropped",
                    reason="queue full",
                    physical_id=change.physical_id,
                    notify_event=change.event.value,
                )

    async def run(self) -> None:
        """Publish queued changes in order, for ever (cancelled at shutdown)."""
        while True:
            change = await self._queue.get()
            try:
                await self._publish(change)
            finally:
                self._queue.task_done()

    async def _publish(self, change: Change) -> None:
        assert self._bus is not None  # send() queues nothing without a bus
        message = notification(change)
        try:
            async with asyncio.timeout(self._publish_timeout):
                await self._bus.publish(self.queue_name, message)
        except (BusError, TimeoutError) as exc:
            self._failed(change, message, str(exc) or type(exc).__name__)
            return
        except Exception as exc:  # noqa: BLE001 - the outermost loop of this publisher: log, count, go on
            self._failed(change, message, repr(exc))
            return
        self._metrics.notifications.labels("published").inc()

    def _failed(self, change: Change, message: ProviderNotification, error: str) -> None:
        self._metrics.notifications.labels("failed").inc()
        log.warning(
            "notification_not_published",
            physical_id=change.physical_id,
            notify_event=change.event.value,
            message_id=message.id,
            error=error,
        )

    async def flush(self, *, seconds: float) -> None:
        """Wait (at most `seconds`) until every queued change has been tried."""
        try:
            async with asyncio.timeout(seconds):
                await self._queue.join()
        except TimeoutError:
            log.warning("notifications_unsent", count=self._queue.qsize(), seconds=seconds)
