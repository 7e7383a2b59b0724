"""Provider notifications: a cloud telling Converge that one of its resources changed.

Where it sits: a provider (today the sandbox cloud, `services/sandbox`)
publishes one `ProviderNotification` per change of one of its resources —
created, status changed, updated, deleted, whoever caused it — to the
provider's own queue, `notification_queue(provider)` (the bus adds the queue
prefix). The observer is the intended consumer: a notification is a hint
that a resource may have drifted, sent at once instead of found by the next
poll; the provider's API stays the source of truth.

Each notification has its own unique message id; delivery is at-least-once
and a provider may drop notifications when the bus is unavailable, so a
consumer treats them as hints and re-reads the resource when it matters.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field

from shared.messages import Codec, Message

NOTIFICATION_QUEUE_PREFIX = "notifications"


def notification_queue(provider: str) -> str:
    """The queue one provider's notifications go to, e.g. `notifications.sandbox`."""
    return f"{NOTIFICATION_QUEUE_PREFIX}.{provider}"


class NotificationEvent(StrEnum):
    """What happened to the resource."""

    CREATED = "created"
    STATUS_CHANGED = "status_changed"  # e.g. BUILD -> ACTIVE, or ACTIVE -> ERROR
    UPDATED = "updated"  # properties changed (through Converge or behind its back)
    DELETED = "deleted"


class ProviderNotification(Message):
    """One change of one resource of a provider, with the resource as it is now."""

    kind = "provider.notification"

    provider: str = Field(min_length=1, description="Which provider, e.g. 'sandbox'.")
    resource_kind: str = Field(min_length=1, description="The provider's kind, e.g. 'server'.")
    physical_id: str = Field(min_length=1, description="The resource's id at the provider.")
    event: NotificationEvent
    status: str = Field(description="Status after the change, e.g. BUILD, ACTIVE, ERROR; DELETED when gone.")
    properties: dict[str, Any] = Field(
        default_factory=dict, description="Actual property values after the change (empty when deleted)."
    )
    reason: str = Field("", description="Why the status is what it is (an ERROR's cause), if known.")
    occurred_at: float = Field(description="time.time() instant of the change at the provider.")


NOTIFICATION_CODEC = Codec([ProviderNotification])
