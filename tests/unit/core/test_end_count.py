"""A traversal's end count split over shards, and what a batch takes from them. Pure."""

from __future__ import annotations

import pytest

from services.engine.core.end_count import shard_counts, take


def test_a_count_is_split_evenly_over_at_most_the_shards_none_empty() -> None:
    assert shard_counts(10, shards=4) == [3, 3, 2, 2]
    assert shard_counts(3, shards=8) == [1, 1, 1]
    assert shard_counts(0) == []
    assert sum(shard_counts(10_001)) == 10_001


def test_a_batch_takes_from_the_fullest_shards_first_exactly_what_it_counts() -> None:
    assert take([(0, 1), (1, 4), (2, 2)], 5) == [(1, 4), (2, 1)]
    assert take([(0, 3), (1, 3)], 3) == [(0, 3)]
    assert take([(0, 3)], 0) == []


def test_taking_more_than_the_shards_hold_is_refused() -> None:
    with pytest.raises(ValueError, match="5 to count down, 3 left"):
        take([(0, 1), (1, 2)], 5)
