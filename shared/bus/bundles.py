"""Bundles: several messages for one queue carried by one AMQP message.

Where it sits: `shared.bus.amqp` packs what one publish sends to the same queue
(the jobs of an engine's batch, a worker's results finishing together) into
bundles, and its subscriptions unpack each bundle and handle every member as a
delivery of its own. The broker then stores, confirms, delivers and is
acknowledged once per bundle instead of once per message, and each process
pays its per-delivery cost once per bundle. Pure: bytes in, bytes out.

A bundle's body is `MAGIC`, then each member as a 4-byte big-endian length and
the member's body (its JSON, as a lone message would carry it). Members keep
their order. A bundle holds at most `max_members` messages and, beyond its
first member, at most `max_bytes` of bodies; a bigger message goes alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from shared.errors import MessageRejected

#: AMQP content type of a bundle (a lone message is "application/json").
CONTENT_TYPE = "application/x-converge-bundle"
MAGIC = b"CVB1"
#: Bodies in one bundle beyond its first member (bytes).
MAX_BUNDLE_BYTES = 512 * 1024
_LENGTH = 4


def pack(bodies: Sequence[bytes], *, max_members: int, max_bytes: int = MAX_BUNDLE_BYTES) -> list[list[int]]:
    """Group `bodies` (in order) into runs of their indexes that each fit one bundle; a
    run of one is sent as a lone message. `max_members` <= 1 groups nothing."""
    runs: list[list[int]] = []
    size = 0
    for i, body in enumerate(bodies):
        last = runs[-1] if runs else None
        if last is not None and len(last) < max_members and size + len(body) <= max_bytes:
            last.append(i)
            size += len(body)
        else:
            runs.append([i])
            size = 0
    return runs


def encode(members: Sequence[bytes]) -> bytes:
    """One bundle's body."""
    parts = [MAGIC]
    for body in members:
        parts.append(len(body).to_bytes(_LENGTH, "big"))
        parts.append(body)
    return b"".join(parts)


def decode(bundle: bytes) -> list[bytes]:
    """The members of a bundle's body, in order; `MessageRejected` naming what is wrong if
    it is not one."""
    if not bundle.startswith(MAGIC):
        raise MessageRejected("bundle: does not start with its marker")
    members: list[bytes] = []
    at = len(MAGIC)
    while at < len(bundle):
        if at + _LENGTH > len(bundle):
            raise MessageRejected(f"bundle: member {len(members) + 1} is cut short in its length")
        size = int.from_bytes(bundle[at : at + _LENGTH], "big")
        at += _LENGTH
        if at + size > len(bundle):
            raise MessageRejected(f"bundle: member {len(members) + 1} is cut short ({size} bytes said)")
        members.append(bundle[at : at + size])
        at += size
    if not members:
        raise MessageRejected("bundle: no member")
    return members
