"""Deduplication by event_id: the first delivery in the log wins, whatever a later one says.

A later delivery is a duplicate. One whose content differs from the first's (another
event_time, type, amount, ...: a client reusing an id, or rebuilding the payload on retry)
is a conflicting duplicate, and is quarantined with the first delivery's position, so that
nothing it said is hidden. `sent_at` is not content: a retry may stamp it again.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from lakehouse.core.events import FIELDS, REASON_CONFLICTING_DUPLICATE
from lakehouse.transforms.validate import quarantine_rows

DEDUP_COLUMNS = ("event_id", "kafka_partition", "kafka_offset")  # what deciding reads
# The contract's fields but the id and sent_at (a retry may stamp it again).
CONTENT_COLUMNS = tuple(f for f in FIELDS if f not in ("event_id", "sent_at"))
FIRST_COLUMNS = (*DEDUP_COLUMNS, "content")  # a first delivery, as later ones are compared


def content_hash() -> Column:
    """A 64-bit hash of an accepted event's content (CONTENT_COLUMNS), as JSON: which field is
    absent is part of it."""
    return F.xxhash64(F.to_json(F.struct(*CONTENT_COLUMNS)))


def as_firsts(events: DataFrame) -> DataFrame:
    """Accepted events as first deliveries (FIRST_COLUMNS)."""
    return events.select(*DEDUP_COLUMNS, content_hash().alias("content"))


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


def conflicting_deliveries(deliveries: DataFrame, firsts: DataFrame) -> DataFrame:
    """The deliveries (accepted events) that are not their event's first delivery (`firsts`,
    one row per event_id, FIRST_COLUMNS) and whose content differs from it: their position
    and the first's (first_partition, first_offset)."""
    first = firsts.select(
        "event_id",
        F.col("kafka_partition").alias("first_partition"),
        F.col("kafka_offset").alias("first_offset"),
        F.col("content").alias("first_content"),
    )
    is_first = (F.col("kafka_partition") == F.col("first_partition")) & (
        F.col("kafka_offset") == F.col("first_offset")
    )
    return (
        as_firsts(deliveries)
        .join(first, "event_id")
        .where(~is_first & (F.col("content") != F.col("first_content")))
        .select("kafka_partition", "kafka_offset", "first_partition", "first_offset")
    )


def conflicting_records(checked: DataFrame, conflicts: DataFrame) -> DataFrame:
    """Quarantine rows for the conflicting deliveries among validated bronze rows
    `checked`."""
    conflicting = checked.join(
        conflicts.withColumnsRenamed({"kafka_partition": "partition", "kafka_offset": "offset"}),
        ["partition", "offset"],
    )
    reason = F.format_string(
        f"{REASON_CONFLICTING_DUPLICATE}: the first delivery, at partition %d offset %d, "
        "says otherwise",
        "first_partition",
        "first_offset",
    )
    return quarantine_rows(conflicting, F.array(F.lit(REASON_CONFLICTING_DUPLICATE)), reason)
