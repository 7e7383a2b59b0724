"""The message bus: one small interface, two implementations.

- `AmqpBus` (RabbitMQ via aio-pika) for distributed deployments;
- `MemoryBus` (asyncio) for `converge up` and deterministic protocol tests.

Semantics, identical in both (one shared test suite proves it):
- `publish(queue, message)` returns once the message is safely queued
  (publisher confirm on AMQP);
- `consume(queue, handler, prefetch=N)` runs up to N handlers at once; a
  message is acknowledged only after its handler returns, and after the
  messages the handler returned (`Outgoing`, its replies) are safely queued:
  replies of handlers that finish together are published as one batch with
  one confirm wait, and their deliveries acknowledged after it;
- a handler's exception decides (`shared.bus.dispatch.verdict_for`): a
  `PermanentError` sends the message to the queue's dead-letter queue at once
  with the reason; a `TransientError` redelivers it after its `retry_after`;
  any other exception redelivers it at once; after `max_deliveries` failed
  deliveries the message is dead-lettered with the last error;
- a body that cannot be decoded (unknown kind, malformed) is dead-lettered at
  once with the reason and never reaches the handler;
- `Subscription.stop()` drains: no new deliveries, in-flight handlers finish
  and are acknowledged; a message held for a delayed redelivery goes back at once.

On AMQP, messages published together for one queue may travel in bundles (one
AMQP message for many, `shared.bus.bundles`; see `shared.bus.amqp`); every rule
above still holds for each message of a bundle.
"""

from shared.bus.base import Bus, DeadLetter, Delivery, Handler, Outgoing, Subscription

__all__ = ["Bus", "DeadLetter", "Delivery", "Handler", "Outgoing", "Subscription"]
