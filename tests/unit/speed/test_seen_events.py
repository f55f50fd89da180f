"""The event_id index on tiny arrays: what is held is found, with every time held for it."""

from __future__ import annotations

import numpy as np

from lakehouse.speed import seen_events
from lakehouse.speed.seen_events import SeenEvents


def found(seen: SeenEvents, *hashes: int) -> list[tuple[int, int]]:
    held, times = seen.lookup(np.array(hashes, np.int64))
    return sorted(zip(held.tolist(), times.tolist(), strict=True))


def test_held_hashes_are_found_with_their_times_and_others_are_not() -> None:
    seen = SeenEvents.of(np.array([30, -5, 7]), np.array([300, 50, 70]), silver_version=3)
    assert found(seen, 7, 8, -5) == [(-5, 50), (7, 70)]
    assert found(seen) == []
    assert seen.silver_version == 3 and len(seen) == 3


def test_ids_added_after_a_batch_are_found_before_and_after_they_are_merged(monkeypatch) -> None:
    seen = SeenEvents.of(np.array([1, 2]), np.array([10, 20]), silver_version=0)
    seen.add(np.array([5, 2]), np.array([50, 21]), silver_version=1)
    # A hash held for two ids (a collision) gives both times: silver tells them apart.
    assert found(seen, 2, 5) == [(2, 20), (2, 21), (5, 50)]
    monkeypatch.setattr(seen_events, "MERGE_AT", 1)
    seen.add(np.array([9]), np.array([90]), silver_version=2)
    assert not seen._recent_hashes, "merged into the sorted arrays"
    assert found(seen, 2, 5, 9, 1) == [(1, 10), (2, 20), (2, 21), (5, 50), (9, 90)]
    assert seen.silver_version == 2 and len(seen) == 5
