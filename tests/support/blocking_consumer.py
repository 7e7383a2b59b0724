"""A consumer process that takes one message and never finishes it.

    python -m tests.support.blocking_consumer AMQP_URL PREFIX QUEUE

Prints `{"event": "handling", "n": N, "attempt": A}` when a handler starts,
then blocks, so a test can SIGKILL it mid-handler.
"""

from __future__ import annotations

import asyncio
import json
import sys

from shared.bus.amqp import AmqpBus
from shared.bus.base import Delivery
from shared.messages import Message
from tests.support.bus_fixtures import CODEC, Ping


async def main(url: str, prefix: str, queue: str) -> None:
    bus = await AmqpBus.connect(url, prefix=prefix, connection_name=f"{prefix}:doomed")

    async def handler(message: Message, delivery: Delivery) -> None:
        assert isinstance(message, Ping)
        print(json.dumps({"event": "handling", "n": message.n, "attempt": delivery.attempt}), flush=True)
        await asyncio.Event().wait()

    await bus.consume(queue, handler, prefetch=1, codec=CODEC)
    print(json.dumps({"event": "ready"}), flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
