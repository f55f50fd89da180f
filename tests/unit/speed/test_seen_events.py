"""The event_id index on tiny arrays: a delivery is found by both its hashes, with its first
delivery's content and position."""

from __future__ import annotations

import numpy as np

from lakehouse.speed import seen_events
from lakehouse.speed.seen_events import SeenEvents, position_of


def held(*rows: tuple[int, int, int, int]) -> dict[str, np.ndarray]:
    """(h1, h2, content, position) rows as the index's arrays."""
    columns = list(zip(*rows, strict=True)) or [(), (), (), ()]
    return {name: np.array(c, np.int64) for name, c in zip(seen_events.HELD, columns, strict=True)}


def found(seen: SeenEvents, *ids: tuple[int, int]) -> list[tuple[int, int, int]]:
    h1, h2 = (np.array(c, np.int64) for c in zip(*ids, strict=True))
    hit = seen.lookup(h1, h2)
    return sorted(zip(hit.at.tolist(), hit.content.tolist(), hit.position.tolist(), strict=True))


def test_a_delivery_is_found_by_both_hashes_and_gives_its_first_delivery() -> None:
    seen = SeenEvents.of(held((30, 1, 300, 3), (-5, 2, 50, 5), (7, 3, 70, 7)), silver_version=3)
    assert found(seen, (7, 3), (8, 3), (-5, 2)) == [(0, 70, 7), (2, 50, 5)]
    assert found(seen, (7, 4)) == [], "the first hash alone is not the id"
    assert seen.silver_version == 3 and len(seen) == 3


def test_ids_added_after_a_batch_are_found_before_and_after_they_are_merged(monkeypatch) -> None:
    seen = SeenEvents.of(held((1, 1, 10, 0), (2, 1, 20, 1)), silver_version=0)
    # Another id with the same first hash: told apart by the second.
    seen.add(held((5, 1, 50, 2), (2, 9, 21, 3)), silver_version=1)
    assert found(seen, (2, 9), (5, 1), (2, 1)) == [(0, 21, 3), (1, 50, 2), (2, 20, 1)]
    monkeypatch.setattr(seen_events, "MERGE_AT", 1)
    seen.add(held((9, 1, 90, 4)), silver_version=2)
    assert not seen._recent, "merged into the sorted arrays"
    assert found(seen, (2, 9), (9, 1), (1, 1)) == [(0, 21, 3), (1, 90, 4), (2, 10, 0)]
    assert seen.silver_version == 2 and len(seen) == 5


def test_a_position_packs_partition_and_offset() -> None:
    assert position_of((7 << 40) + 123_456_789) == (7, 123_456_789)
