"""What a micro-batch decides from and reports (lakehouse.speed.micro_batch): the state the
previous batch pinned in its progress row, the batch's own counts and watermark marks, and the
time each of its steps took."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
from pyspark.sql import functions as F

from lakehouse.core.times import from_micros
from lakehouse.speed.seen_events import held_arrays
from lakehouse.transforms.lateness import PartitionMarks, marks_of_arrays
from lakehouse.transforms.validate import is_accepted

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


# The first deliveries in silver of a batch's other event_ids (transforms.dedup FIRST_COLUMNS).
FIRSTS_SCHEMA = "event_id string, kafka_partition int, kafka_offset bigint, content bigint"


@dataclass(frozen=True)
class Dedup:
    new: DataFrame  # accepted events seen for the first time
    earlier: DataFrame  # silver's first deliveries of the batch's other event_ids


@dataclass(frozen=True)
class PinnedState:
    """What the previous batch left behind; a replayed batch decides from exactly this."""

    watermark_micros: int | None = None
    silver_version: int | None = None
    offsets: dict[int, int] | None = None
    newest_event_micros: int | None = None
    waiting: int | None = None  # records left in Kafka when the previous batch ended
    # What moves the watermark (transforms.lateness).
    marks: PartitionMarks = field(default_factory=PartitionMarks)


def progress_record(row: Mapping[str, Any]) -> dict[str, Any]:
    """The progress row as stored: its microsecond columns also as timestamps."""

    def instant(micros: int | None) -> datetime | None:
        return None if micros is None else from_micros(micros)

    return {
        **row,
        "watermark": instant(row["watermark_micros"]),
        "newest_event_time": instant(row["newest_event_micros"]),
    }


def pinned_from(progress: Mapping[str, Any]) -> PinnedState:
    """The state a batch's progress row leaves for the next batch."""
    return PinnedState(
        watermark_micros=progress["watermark_micros"],
        silver_version=progress["silver_version"],
        offsets=dict(progress["offsets"] or {}),
        newest_event_micros=progress["newest_event_micros"],
        waiting=progress["total_lag"],
        # A row written before the marks existed has none: the watermark holds until the
        # partitions have gathered them again.
        marks=PartitionMarks(
            {p: list(times) for p, times in (progress.get("event_marks") or {}).items()},
            dict(progress.get("arrival_marks") or {}),
        ),
    )


class StepTimer:
    """Seconds spent per step of a batch, reported in the progress row."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        began = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = round(time.monotonic() - began, 3)


@dataclass(frozen=True)
class BatchStats:
    input_rows: int
    quarantined: int
    new_events: int
    late_events: int
    newest_on_time: int | None  # microseconds
    # The records' keys and values as read: bounds what any of the batch's appends collects
    # (a replay keeps the values of quarantined records alone; its batches are large).
    input_bytes: int
    next_offsets: dict[int, int]  # per partition: the offset after the last one read
    marks: PartitionMarks  # the batch's own, of its new events
    conflicting: int = 0  # duplicates whose content differs from the first delivery's

    @property
    def on_time(self) -> int:
        return self.new_events - self.late_events

    @property
    def duplicates(self) -> int:
        return self.input_rows - self.quarantined - self.new_events


def batch_stats(
    checked: DataFrame, new: dict[str, np.ndarray], wm: int | None, keep: int
) -> BatchStats:
    """Small aggregations that every later decision and the progress row share; `new` is the
    batch's new events as collected to the driver (`new_event_arrays`)."""
    per_partition = (
        checked.groupBy("partition")
        .agg(
            F.count("*").alias("rows"),
            F.sum((~is_accepted()).cast("long")).alias("quarantined"),
            F.max("offset").alias("last"),
            F.sum(
                F.coalesce(F.octet_length("key"), F.lit(0))
                + F.coalesce(F.octet_length("value"), F.lit(0))
            ).alias("bytes"),
        )
        .collect()
    )
    times = new["event_time"]
    on_time = np.full(len(times), True) if wm is None else times >= wm
    return BatchStats(
        input_rows=sum(int(r["rows"]) for r in per_partition),
        quarantined=sum(int(r["quarantined"] or 0) for r in per_partition),
        new_events=len(times),
        late_events=int(np.count_nonzero(~on_time)),
        newest_on_time=int(times[on_time].max()) if on_time.any() else None,
        input_bytes=sum(int(r["bytes"] or 0) for r in per_partition),
        next_offsets={int(r["partition"]): int(r["last"]) + 1 for r in per_partition},
        marks=marks_of_arrays(new["kafka_partition"], times, new["kafka_timestamp"], on_time, keep),
    )


def new_event_arrays(new: DataFrame) -> dict[str, np.ndarray]:
    """The batch's new events on the driver, in one job: what the seen-events index keeps
    (HELD) and what the batch's stats and watermark marks need (times in micros). Both are a
    few numbers per event, bounded as the index itself is."""
    return held_arrays(
        new,
        kafka_partition=F.col("kafka_partition"),
        event_time=F.unix_micros("event_time"),
        kafka_timestamp=F.unix_micros("kafka_timestamp"),
    )
