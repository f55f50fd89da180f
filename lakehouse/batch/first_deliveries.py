"""batch.first_deliveries: every event_id's first accepted delivery in bronze, the batch
layer's dedup.

A re-delivery may carry another event_time than the first (lakehouse.transforms.dedup), so
the first delivery of an event the batch recomputes can be anywhere earlier in bronze, outside
what an interval reads. Each batch run first brings this table up to date with the bronze
records appended since the last run; an interval's events are then the deliveries it lists.

Reading bronze by Kafka timestamp is exact, not a guess: an accepted event is never more than
`future_tolerance_seconds` ahead of its Kafka timestamp (validation quarantines it), so every
delivery of an event at or after t has a Kafka timestamp at or after t - tolerance.

"First" is the speed layer's order: bronze is appended one micro-batch at a time (one
`ingested_at` each), and within a micro-batch the lowest (partition, offset) wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from lakehouse.core.delta_io import each_new_chunk, merge_once, read_table
from lakehouse.core.tables import BATCH, table
from lakehouse.transforms.dedup import DEDUP_COLUMNS
from lakehouse.transforms.parse import parse_events
from lakehouse.transforms.validate import ValidationRules, accepted_events, validate_events

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakehouse.core.config import Settings

FIRST_DELIVERIES = table("batch.first_deliveries")
BRONZE = table("bronze.events_raw")


def first_by_arrival(deliveries: DataFrame) -> DataFrame:
    """One row per event_id of accepted deliveries: the earliest (ingested_at, partition,
    offset)."""
    order = F.struct("ingested_at", "kafka_partition", "kafka_offset")
    return (
        deliveries.groupBy("event_id")
        .agg(F.min(order).alias("first"))
        .select("event_id", "first.kafka_partition", "first.kafka_offset", "first.ingested_at")
    )


def update_first_deliveries(spark: SparkSession, settings: Settings) -> None:
    """Add the event_ids of the bronze records appended since the last update."""
    rules = ValidationRules.of(settings)

    def add(chunk: DataFrame, query_id: str, chunk_id: int) -> None:
        accepted = (
            chunk.transform(parse_events)
            .transform(validate_events, rules)
            .transform(accepted_events)
            .select(*DEDUP_COLUMNS, "ingested_at")
        )
        merge_once(
            first_by_arrival(accepted),
            FIRST_DELIVERIES,
            settings,
            f"{BATCH}:first_deliveries:{query_id}",
            chunk_id,
            # An id already listed came in an earlier chunk: that delivery stays first.
            lambda m: m.whenNotMatchedInsertAll(),
            on="t.event_id = s.event_id",
        )

    each_new_chunk(spark, BRONZE, settings, FIRST_DELIVERIES, add)


def only_first_deliveries(events: DataFrame, firsts: DataFrame) -> DataFrame:
    """The accepted `events` (DEDUP_COLUMNS among theirs) that are their id's first delivery."""
    return events.join(firsts.select(*DEDUP_COLUMNS), list(DEDUP_COLUMNS), "left_semi")


def first_deliveries_from(
    spark: SparkSession, settings: Settings, raw: DataFrame, since: datetime, columns: Sequence[str]
) -> DataFrame:
    """The accepted events in bronze `raw` with an event_time from `since` on, each its id's
    first delivery (the table brought up to date first), with DEDUP_COLUMNS and `columns`."""
    # From bronze's newest version: at least all of `raw` (bronze is only appended to).
    update_first_deliveries(spark, settings)
    firsts = read_table(spark, FIRST_DELIVERIES, settings)
    tolerance = timedelta(seconds=settings.speed.future_tolerance_seconds)
    return (
        raw.where(F.col("kafka_timestamp") >= F.lit(since - tolerance))
        .transform(parse_events)
        .transform(validate_events, ValidationRules.of(settings))
        .transform(accepted_events)
        .select(*dict.fromkeys([*DEDUP_COLUMNS, *columns]))
        .transform(only_first_deliveries, firsts)
        .where(F.col("event_time") >= F.lit(since))
    )
