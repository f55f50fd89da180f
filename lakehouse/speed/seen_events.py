"""The event_ids silver already holds, as a lookup that costs the same whatever silver's size.

A re-delivery may carry another event_time than the first delivery (a client reusing an id,
or rebuilding the payload on retry), so silver's layout by time cannot find the first: the
stream keeps, on the driver, every silver event_id's 128-bit fingerprint (two 64-bit
xxhash64 hashes) with its first delivery's position and content hash, in sorted arrays. A
micro-batch looks its ids up there (a binary search each) and reads nothing from silver. Two
ids share a fingerprint with odds of about 10^-25 among ten million ids: the fingerprint is
taken as the id, as a UUID is taken as unique.

It holds every id silver holds (32 bytes each: 320 MB for 10 million events), so a
re-delivery is caught however long after the first. It is built from silver, at the version
a batch pins, when the stream starts (one read of silver), and a batch adds its own ids once
it has committed, so a retried batch never sees its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from lakehouse.transforms.dedup import content_hash

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

# New ids wait in small arrays; they join the sorted ones when they reach this many, so a
# batch's additions cost a sort of the batch, not of everything held.
MERGE_AT = 1 << 20
# What the index keeps of a delivery, in this order (see `held_columns`).
HELD = ("h1", "h2", "content", "position")


def fingerprint() -> tuple[Column, Column]:
    """The two hashes of `event_id` the index keys on (xxhash64, two seeds)."""
    from pyspark.sql import functions as F

    return F.xxhash64("event_id"), F.xxhash64(F.lit("tributary"), "event_id")


def held_columns() -> list[Column]:
    """A delivery's HELD values, as Spark columns of an accepted event (silver's columns)."""
    from pyspark.sql import functions as F

    h1, h2 = fingerprint()
    position = F.shiftleft(F.col("kafka_partition").cast("long"), 40) + F.col("kafka_offset")
    return [
        h1.alias("h1"),
        h2.alias("h2"),
        content_hash().alias("content"),
        position.alias("position"),
    ]


def held_arrays(rows: DataFrame, **extra: Column) -> dict[str, np.ndarray]:
    """`rows` (an accepted event's columns) as HELD arrays, and the `extra` columns under
    their names, collected to the driver in one job."""
    named = [c.alias(name) for name, c in extra.items()]
    table: pa.Table = rows.select(*held_columns(), *named).toArrow()
    return {name: table.column(name).to_numpy(zero_copy_only=False) for name in (*HELD, *extra)}


def position_of(position: int) -> tuple[int, int]:
    """(partition, offset) of a HELD position."""
    return position >> 40, position & ((1 << 40) - 1)


@dataclass(frozen=True)
class Found:
    """Which of the looked-up deliveries silver holds, and its first delivery's values."""

    at: np.ndarray  # indexes into the looked-up arrays
    content: np.ndarray
    position: np.ndarray


@dataclass
class SeenEvents:
    """event_id fingerprint -> first delivery's content hash and position, for one silver
    version."""

    silver_version: int | None = None
    _held: dict[str, np.ndarray] = field(
        default_factory=lambda: {name: np.empty(0, np.int64) for name in HELD}
    )
    _recent: list[dict[str, np.ndarray]] = field(default_factory=list)

    @classmethod
    def of(cls, held: dict[str, np.ndarray], silver_version: int | None) -> SeenEvents:
        seen = cls(silver_version)
        seen.add(held, silver_version)
        seen._merge()
        return seen

    def __len__(self) -> int:
        return len(self._held["h1"]) + sum(len(r["h1"]) for r in self._recent)

    def add(self, held: dict[str, np.ndarray], silver_version: int | None) -> None:
        """Deliveries silver holds from `silver_version` on (a batch's, once committed)."""
        self._recent.append({name: np.asarray(held[name], np.int64) for name in HELD})
        self.silver_version = silver_version
        if sum(len(r["h1"]) for r in self._recent) >= MERGE_AT:
            self._merge()

    def lookup(self, h1: np.ndarray, h2: np.ndarray) -> Found:
        """The deliveries (h1[i], h2[i]) whose id silver holds."""
        h1, h2 = np.asarray(h1, np.int64), np.asarray(h2, np.int64)
        at: list[int] = []
        content: list[int] = []
        position: list[int] = []

        def take(i: int, held: dict[str, np.ndarray], j: int) -> None:
            if held["h2"][j] == h2[i]:
                at.append(i)
                content.append(int(held["content"][j]))
                position.append(int(held["position"][j]))

        main = self._held
        left = np.searchsorted(main["h1"], h1, "left")
        right = np.searchsorted(main["h1"], h1, "right")
        for i in np.nonzero(right > left)[0].tolist():
            for j in range(int(left[i]), int(right[i])):
                take(i, main, j)
        for recent in self._recent:
            for i in np.nonzero(np.isin(h1, recent["h1"]))[0].tolist():
                for j in np.nonzero(recent["h1"] == h1[i])[0].tolist():
                    take(i, recent, j)
        return Found(np.array(at, np.int64), np.array(content, np.int64), np.array(position))

    def _merge(self) -> None:
        if not self._recent:
            return
        merged = {n: np.concatenate([self._held[n], *(r[n] for r in self._recent)]) for n in HELD}
        order = np.argsort(merged["h1"], kind="stable")
        self._held = {name: values[order] for name, values in merged.items()}
        self._recent = []


def seen_in(silver: DataFrame, silver_version: int | None) -> SeenEvents:
    """The index of `silver`, read at `silver_version`."""
    return SeenEvents.of(held_arrays(silver), silver_version)
