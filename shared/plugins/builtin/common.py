"""Helpers the built-in types share: names, keyed randomness, pending markers.

- `physical_name`: Heat-style `{stack}-{resource}-{suffix}` whose suffix comes
  from the action's idempotency key, so a redelivered create returns the same
  id (no duplicate) and every new action gets a new one.
- `KeyedRandom`: a deterministic random stream (HMAC-SHA256 in counter mode)
  seeded by that key, for values that must survive redelivery (RandomString,
  signal tokens). As secret as the key: the key travels in job messages.
- `Pending` and `with_pending`/`split_pending`: an unfinished action's
  "done at" instant carried in the physical id, because `observe` gets only
  the physical id and may run in another process.
- `pause`: wait that gives up as soon as the action is cancelled.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from shared.errors import TransientError
from shared.plugins.base import ActionContext, Properties

T = TypeVar("T")
P = TypeVar("P", bound=Properties)

PENDING_MARK = "~"


def short_hash(text: str, length: int = 12) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def physical_name(ctx: ActionContext) -> str:
    """Unique per action, identical on redelivery of the same action."""
    return f"{ctx.stack_name}-{ctx.resource_name}-{short_hash(ctx.idempotency_key)}"


class KeyedRandom:
    """Reproducible randomness from (key, purpose); uniform via rejection sampling."""

    def __init__(self, key: str, purpose: str) -> None:
        self._key = hashlib.sha256(f"{purpose}\0{key}".encode()).digest()
        self._counter = 0
        self._buffer = b""

    def bytes(self, n: int) -> bytes:
        while len(self._buffer) < n:
            block = self._counter.to_bytes(8, "big")
            self._buffer += hmac.new(self._key, block, hashlib.sha256).digest()
            self._counter += 1
        out, self._buffer = self._buffer[:n], self._buffer[n:]
        return out

    def below(self, n: int) -> int:
        """Uniform integer in [0, n)."""
        limit = (1 << 32) - (1 << 32) % n
        while True:
            value = int.from_bytes(self.bytes(4), "big")
            if value < limit:
                return value % n

    def choice(self, items: Sequence[T]) -> T:
        return items[self.below(len(items))]

    def shuffled(self, items: Sequence[T]) -> list[T]:
        out = list(items)
        for i in range(len(out) - 1, 0, -1):
            j = self.below(i + 1)
            out[i], out[j] = out[j], out[i]
        return out

    def hex(self, n_bytes: int) -> str:
        return self.bytes(n_bytes).hex()


@dataclass(frozen=True)
class Pending:
    """An action that completes by itself at `ready_at` (inf = never)."""

    action: str
    ready_at: float
    fail: bool = False


def with_pending(base: str, pending: Pending | None) -> str:
    """`base`, or `base~action~ready_at~ok|fail` while an action is pending."""
    if pending is None:
        return base
    ready = "inf" if math.isinf(pending.ready_at) else f"{pending.ready_at:.3f}"
    outcome = "fail" if pending.fail else "ok"
    return PENDING_MARK.join((base, pending.action, ready, outcome))


def split_pending(physical_id: str) -> tuple[str, Pending | None]:
    """Inverse of `with_pending`; an id without a well-formed marker is all base."""
    parts = physical_id.rsplit(PENDING_MARK, 3)
    if len(parts) != 4 or parts[3] not in ("ok", "fail"):
        return physical_id, None
    base, action, ready, outcome = parts
    try:
        ready_at = float(ready)
    except ValueError:
        return physical_id, None
    return base, Pending(action, ready_at, outcome == "fail")


def as_props(props: Properties, kind: type[P]) -> P:
    """`props` as this type's own model; the worker always parses with it."""
    if not isinstance(props, kind):
        raise TypeError(f"expected {kind.__name__}, got {type(props).__name__}")
    return props


async def pause(ctx: ActionContext, seconds: float) -> None:
    """Wait `seconds`, or raise `TransientError` at once if the action is cancelled."""
    check_cancelled(ctx)
    if seconds <= 0:
        return
    try:
        await asyncio.wait_for(ctx.cancelled.wait(), timeout=seconds)
    except TimeoutError:
        return
    raise TransientError(f"{ctx.resource_name}: action cancelled")


def check_cancelled(ctx: ActionContext) -> None:
    if ctx.cancelled.is_set():
        raise TransientError(f"{ctx.resource_name}: action cancelled")
