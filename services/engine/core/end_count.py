"""A traversal's end count, split over shards: how it is split, and what a batch takes.

Where it sits: `store/graph.py` stores a traversal's count of counted nodes
(`core.graph.counted_nodes`) as `shard_counts` rows and counts them down there.
A batch that finishes nodes of the traversal takes their number from the
fullest shard no other transaction holds (never waiting for one), so the
batches of several engines do not queue on one row and the shards drain
evenly; only when no free shard has enough (near the end) does it lock them
all, in order, and take from several (`take`). A shard that reaches
zero counts down the traversal's count of open shards, which reaches zero once:
the traversal's end. That row is locked once per shard, not once per batch
(issue 18 item 3).
"""

from __future__ import annotations

from collections.abc import Sequence

#: Shards of a traversal's count: more than the batches that finish nodes of one
#: traversal at once (two engines, two batches each, and their follow-on rounds).
SHARDS = 8


def shard_counts(total: int, *, shards: int = SHARDS) -> list[int]:
    """`total` split as evenly as it goes over at most `shards` shards, none empty."""
    used = min(shards, total)
    return [total // used + (1 if i < total % used else 0) for i in range(used)]


def take(counts: Sequence[tuple[int, int]], wanted: int) -> list[tuple[int, int]]:
    """(shard, amount) to take `wanted` from the (shard, count) `counts` (each locked, all
    those left): from the largest first, so as few shards as may be reach zero before
    the end. Raises `ValueError` if they hold less: nodes counted twice, a bug."""
    left = wanted
    out: list[tuple[int, int]] = []
    for shard, count in sorted(counts, key=lambda c: (-c[1], c[0])):
        if left == 0:
            break
        amount = min(count, left)
        if amount > 0:
            out.append((shard, amount))
            left -= amount
    if left:
        raise ValueError(f"{wanted} to count down, {wanted - left} left in the shards")
    return sorted(out)
