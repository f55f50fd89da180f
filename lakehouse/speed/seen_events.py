"""The event_ids silver already holds, as a lookup that costs the same whatever silver's size.

A re-delivery may carry another event_time than the first delivery (a client reusing an id,
or rebuilding the payload on retry), so silver's time layout cannot find the first: the
stream keeps, on the driver, every silver event_id's 64-bit hash (Spark's xxhash64) with its
first delivery's event_time, in sorted arrays. A micro-batch looks its ids up there (a binary
search each), and reads from silver only the rows of the ids found, at their event times,
which Delta's file statistics locate: the few real duplicates, and a hash collision now and
then (one in about 10^12 pairs), which that read tells apart.

It holds every id silver holds (16 bytes each: 160 MB for 10 million events), so a
re-delivery is caught however long after the first. It is built from silver, at the version
a batch pins, when the stream starts (one read of silver's event_id and event_time), and a
batch adds its own ids once it has committed, so a retried batch never sees its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# New ids wait in a small array; they join the sorted one when it reaches this size, so a
# batch's additions cost a sort of the batch, not of everything held.
MERGE_AT = 1 << 20


def id_hash() -> Column:
    """The hash the index keys on, as a Spark column of `event_id`."""
    from pyspark.sql import functions as F

    return F.xxhash64("event_id")


@dataclass
class SeenEvents:
    """event_id hash -> first delivery's event_time (micros), for one silver version."""

    silver_version: int | None = None
    _hashes: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    _times: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    _recent_hashes: list[np.ndarray] = field(default_factory=list)
    _recent_times: list[np.ndarray] = field(default_factory=list)

    @classmethod
    def of(cls, hashes: np.ndarray, times: np.ndarray, silver_version: int | None) -> SeenEvents:
        seen = cls(silver_version)
        seen.add(hashes, times, silver_version)
        seen._merge()
        return seen

    def __len__(self) -> int:
        return len(self._hashes) + sum(len(h) for h in self._recent_hashes)

    def add(self, hashes: np.ndarray, times: np.ndarray, silver_version: int | None) -> None:
        """Ids silver holds from `silver_version` on (a batch's, once committed)."""
        self._recent_hashes.append(np.asarray(hashes, np.int64))
        self._recent_times.append(np.asarray(times, np.int64))
        self.silver_version = silver_version
        if sum(len(h) for h in self._recent_hashes) >= MERGE_AT:
            self._merge()

    def lookup(self, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The hashes among `hashes` that are held, and the event times held for them (a
        hash held for two ids gives both times)."""
        hashes = np.asarray(hashes, np.int64)
        hits: list[tuple[int, int]] = []
        left = np.searchsorted(self._hashes, hashes, "left")
        right = np.searchsorted(self._hashes, hashes, "right")
        found = right > left
        for first, end in zip(left[found], right[found], strict=True):
            hits += zip(
                self._hashes[first:end].tolist(), self._times[first:end].tolist(), strict=True
            )
        for recent_h, recent_t in zip(self._recent_hashes, self._recent_times, strict=True):
            held = np.isin(recent_h, hashes)
            hits += zip(recent_h[held].tolist(), recent_t[held].tolist(), strict=True)
        pairs = np.array(hits, np.int64).reshape(-1, 2)
        return pairs[:, 0], pairs[:, 1]

    def _merge(self) -> None:
        if not self._recent_hashes:
            return
        hashes = np.concatenate([self._hashes, *self._recent_hashes])
        times = np.concatenate([self._times, *self._recent_times])
        order = np.argsort(hashes, kind="stable")
        self._hashes, self._times = hashes[order], times[order]
        self._recent_hashes, self._recent_times = [], []


def seen_in(silver: DataFrame, silver_version: int | None) -> SeenEvents:
    """The index of `silver`, read at `silver_version`."""
    from pyspark.sql import functions as F

    table = silver.select(id_hash(), F.unix_micros("event_time")).toArrow()
    return SeenEvents.of(
        table.column(0).to_numpy(zero_copy_only=False),
        table.column(1).to_numpy(zero_copy_only=False),
        silver_version,
    )
