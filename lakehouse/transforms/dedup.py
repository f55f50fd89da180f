"""Deduplication by event_id: the first delivery wins (lowest Kafka partition, offset)."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

DEDUP_COLUMNS = ("event_id", "kafka_partition", "kafka_offset")  # what deciding reads


def first_delivery_per_event(events: DataFrame) -> DataFrame:
    """Keep one row per event_id: the earliest in the log. Static DataFrames only."""
    first = Window.partitionBy("event_id").orderBy("kafka_partition", "kafka_offset")
    return (
        events.withColumn("_delivery", F.row_number().over(first))
        .where("_delivery = 1")
        .drop("_delivery")
    )


def drop_seen_events(events: DataFrame, seen: DataFrame) -> DataFrame:
    """Events whose event_id is not in `seen` (a DataFrame with an event_id column)."""
    return events.join(seen.select("event_id"), "event_id", "left_anti")
