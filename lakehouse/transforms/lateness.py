"""The watermark: which events may still change a window, and which arrived too late.

An event older than the watermark in force when its micro-batch started is late: every window
it belongs to (1-minute, 10-minute sliding, or a session it could extend) has already been
closed, so it goes to speed.late_events and the views stay final. One rule for every view
keeps `batch = speed + late` true window by window.

What moves the watermark (`WatermarkRule`, docs/architecture.md):

- Per Kafka partition, the `support_events`-th newest on-time event_time seen so far: an
  event counts only once that many events of its partition have reached its time. One
  record far ahead of the rest (a reused event_id with a new time, one current event among
  a backlog of old ones) is accepted and counted in its windows, but cannot drag the
  watermark ahead and turn the rest of the stream late.
- The watermark is the minimum of that over the partitions, minus the allowed lateness, as
  in Flink and Kafka Streams: a partition behind the others (a backlog being loaded) holds
  it back instead of being turned late. A partition counts once it has `support_events`
  events, and stops counting while it is idle: its newest record's Kafka timestamp more than
  `idle_partition_seconds` older than the newest of all partitions.
- It never moves back.

Everything is decided from the records (event times, Kafka timestamps), never the wall
clock, so a replayed batch and the batch layer decide the same. Watermarks travel as
microseconds since the epoch (UTC): no time zone can shift them between Spark and Python.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

if TYPE_CHECKING:
    from lakehouse.core.config import Settings

MICROS = 1_000_000


@dataclass(frozen=True)
class WatermarkRule:
    allowed_lateness_seconds: int
    support_events: int
    idle_partition_seconds: int

    @classmethod
    def of(cls, settings: Settings) -> WatermarkRule:
        """The rule the configuration sets (`speed` section), for every layer alike."""
        speed = settings.speed
        return cls(
            allowed_lateness_seconds=speed.allowed_lateness_seconds,
            support_events=speed.watermark_support_events,
            idle_partition_seconds=speed.idle_partition_seconds,
        )


@dataclass(frozen=True)
class PartitionMarks:
    """Per Kafka partition: its newest on-time event times (micros, newest first, at most
    `support_events` of them) and the Kafka timestamp (micros) of its newest record."""

    events: Mapping[int, Sequence[int]] = field(default_factory=dict)
    arrivals: Mapping[int, int] = field(default_factory=dict)

    def merged(self, newer: PartitionMarks, keep: int) -> PartitionMarks:
        """These marks and a later batch's, keeping the `keep` newest event times."""
        partitions = set(self.events) | set(newer.events)
        events = {
            p: sorted([*self.events.get(p, ()), *newer.events.get(p, ())], reverse=True)[:keep]
            for p in sorted(partitions)
        }
        arrivals = dict(self.arrivals)
        for p, at in newer.arrivals.items():
            arrivals[p] = max(at, arrivals.get(p, at))
        return PartitionMarks(events, dict(sorted(arrivals.items())))

    def supported_newest(self, rule: WatermarkRule) -> int | None:
        """The newest event time every counting partition supports (see the module), or None
        while no partition counts."""
        if not self.arrivals:
            return None
        active_since = max(self.arrivals.values()) - rule.idle_partition_seconds * MICROS
        supported = [
            times[rule.support_events - 1]
            for p, times in self.events.items()
            if len(times) >= rule.support_events and self.arrivals.get(p, 0) >= active_since
        ]
        return min(supported, default=None)


def watermark_column(watermark_micros: int) -> Column:
    return F.timestamp_micros(F.lit(watermark_micros))


def late_events(events: DataFrame, watermark_micros: int | None) -> DataFrame:
    if watermark_micros is None:
        return events.limit(0)
    return events.where(F.col("event_time") < watermark_column(watermark_micros))


def on_time_events(events: DataFrame, watermark_micros: int | None) -> DataFrame:
    if watermark_micros is None:
        return events
    return events.where(F.col("event_time") >= watermark_column(watermark_micros))


def partition_marks(events: DataFrame, keep: int, counted: Column | None = None) -> PartitionMarks:
    """The marks of accepted events (silver's columns): the `keep` newest event times of
    those `counted` (default all) and the newest Kafka timestamp of all, per partition."""
    counted = F.lit(True) if counted is None else counted
    newest_first = Window.partitionBy("kafka_partition").orderBy(F.col("t").desc())
    # A rank filter over a window: Spark keeps each partition's top rows before the shuffle.
    top = (
        events.where(counted)
        .select("kafka_partition", F.unix_micros("event_time").alias("t"))
        .withColumn("rank", F.row_number().over(newest_first))
        .where(F.col("rank") <= keep)
        .groupBy("kafka_partition")
        .agg(F.sort_array(F.collect_list("t"), asc=False).alias("times"))
        .collect()
    )
    arrivals = (
        events.groupBy("kafka_partition")
        .agg(F.max(F.unix_micros("kafka_timestamp")).alias("at"))
        .collect()
    )
    return PartitionMarks(
        {int(r["kafka_partition"]): list(r["times"]) for r in top},
        {int(r["kafka_partition"]): int(r["at"]) for r in arrivals},
    )


def marks_of_arrays(
    partitions: np.ndarray, times: np.ndarray, arrivals: np.ndarray, counted: np.ndarray, keep: int
) -> PartitionMarks:
    """`partition_marks` of events already on the driver, one array element per event: their
    Kafka partition, event time and Kafka timestamp (micros), and whether each is counted."""
    events = {}
    for p in np.unique(partitions[counted]).tolist():
        newest_first = -np.sort(-times[counted & (partitions == p)])
        events[int(p)] = newest_first[:keep].tolist()
    return PartitionMarks(
        events,
        {int(p): int(arrivals[partitions == p].max()) for p in np.unique(partitions).tolist()},
    )


def advance_watermark(
    current: int | None, newest_on_time: int | None, allowed_lateness_seconds: int
) -> int | None:
    """The next watermark, in microseconds; it never moves back."""
    if newest_on_time is None:
        return current
    candidate = newest_on_time - allowed_lateness_seconds * MICROS
    return candidate if current is None or candidate > current else current


def next_watermark(current: int | None, marks: PartitionMarks, rule: WatermarkRule) -> int | None:
    """The watermark after a batch that leaves `marks`: see the module."""
    return advance_watermark(current, marks.supported_newest(rule), rule.allowed_lateness_seconds)
