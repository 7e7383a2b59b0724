"""Bus fixtures: the same tests run against the in-process and AMQP buses.

`BusKit.connect()` gives a bus as a separate consumer process would see it:
a new RabbitMQ connection for AMQP, the one shared in-process bus for memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.bus import Bus
from shared.bus.amqp import BUNDLE_MAX, AmqpBus
from shared.bus.memory import MemoryBus
from shared.messages import Codec, Message


class Ping(Message):
    kind = "test.ping"
    n: int


class Other(Message):
    kind = "test.other"


CODEC = Codec([Ping])


@dataclass
class BusKit:
    kind: str
    amqp_url: str
    prefix: str
    max_deliveries: int = 3
    bundle_max: int = BUNDLE_MAX  # AMQP: messages one publish packs per AMQP message
    bundled_queues: frozenset[str] = frozenset()  # AMQP: the queues it does that for
    _memory: MemoryBus | None = None
    _opened: list[Bus] = field(default_factory=list)

    async def connect(self, name: str = "test") -> Bus:
        if self.kind == "memory":
            if self._memory is None:
                self._memory = MemoryBus(max_deliveries=self.max_deliveries)
                self._opened.append(self._memory)
            return self._memory
        bus = await AmqpBus.connect(
            self.amqp_url,
            prefix=self.prefix,
            max_deliveries=self.max_deliveries,
            connection_name=f"{self.prefix}:{name}",
            bundle_max=self.bundle_max,
            bundled_queues=self.bundled_queues,
        )
        self._opened.append(bus)
        return bus

    async def close(self) -> None:
        for bus in reversed(self._opened):
            await bus.close()
