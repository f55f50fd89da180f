"""Deduplication by event_id: the first delivery wins (lowest Kafka partition, offset)."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

DEDUP_COLUMNS = ("event_id", "kafka_partition", "kafka_offset")  # what deciding reads


def first_delivery_per_event(events: DataFrame) -> DataFrame:
    """Keep one row per event_id: the earliest in the log. Static DataFrames only.

    Written as "the row at the event's lowest log position", not as `row_number() = 1`:
    Spark turns the latter into a top-1 limit that sorts every row before the shuffle too,
    to drop almost nothing (duplicates are rare)."""
    position = F.struct("kafka_partition", "kafka_offset")
    first = F.min(position).over(Window.partitionBy("event_id"))
    return events.withColumn("_first", first).where(position == F.col("_first")).drop("_first")


def drop_seen_events(events: DataFrame, seen: DataFrame) -> DataFrame:
    """Events whose event_id is not in `seen` (a DataFrame with an event_id column)."""
    return events.join(seen.select("event_id"), "event_id", "left_anti")
