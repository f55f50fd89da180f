"""batch.first_deliveries: every event_id's first accepted delivery in bronze, the batch
layer's dedup.

A re-delivery may carry another event_time than the first (lakehouse.transforms.dedup), so
the first delivery of an event the batch recomputes can be anywhere earlier in bronze, outside
what an interval reads. Each batch run first brings this table up to date with the bronze
records appended since the last run, and with it batch.redeliveries: every other accepted
delivery, by position. An interval's events are then the deliveries it reads less the
redeliveries, a small table (the share of deliveries that repeat one), so deciding needs no
join of the interval's events with every event_id ever seen.

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

from pyspark.errors import StreamingQueryException
from pyspark.sql import functions as F

from lakehouse.core.delta_io import (
    delete_folder,
    each_new_chunk,
    merge_once,
    read_table,
    table_exists,
)
from lakehouse.core.tables import BATCH, table
from lakehouse.transforms.dedup import DEDUP_COLUMNS
from lakehouse.transforms.parse import parse_events
from lakehouse.transforms.validate import ValidationRules, accepted_events, validate_events

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakehouse.core.config import Settings

FIRST_DELIVERIES = table("batch.first_deliveries")
REDELIVERIES = table("batch.redeliveries")
POSITION = ("kafka_partition", "kafka_offset")
BRONZE = table("bronze.events_raw")
# The Delta stream source's error when a commit it reads changed rows instead of adding them.
BRONZE_REWRITTEN = "DELTA_SOURCE_TABLE_IGNORE_CHANGES"


def first_by_arrival(deliveries: DataFrame) -> DataFrame:
    """One row per event_id of accepted deliveries: the earliest (ingested_at, partition,
    offset)."""
    order = F.struct("ingested_at", "kafka_partition", "kafka_offset")
    return (
        deliveries.groupBy("event_id")
        .agg(F.min(order).alias("first"))
        .select("event_id", "first.kafka_partition", "first.kafka_offset", "first.ingested_at")
    )


# How the joins against a chunk's own deliveries run. Spark takes a checkpointed side's size
# from the plan it came from, which can be far below its real size, and would try to
# broadcast a day's event ids (a driver already holding a replay's state ran out of memory
# doing so); a sort-merge join never needs a side in memory whole.
SHUFFLED = "merge"


def update_first_deliveries(spark: SparkSession, settings: Settings) -> None:
    """Add the first deliveries and the redeliveries among the bronze records appended since
    the last update."""
    rules = ValidationRules.of(settings)

    def add(chunk: DataFrame, query_id: str, chunk_id: int) -> None:
        accepted = (
            chunk.transform(parse_events)
            .transform(validate_events, rules)
            .transform(accepted_events)
            .select(*DEDUP_COLUMNS, "ingested_at")
            .localCheckpoint()
        )
        # An id listed already came in an earlier chunk: that delivery stays first. Every
        # other delivery is a redelivery, also when bronze is read again from its start (a new
        # checkpoint): decided by position against the firsts, never by "seen before".
        firsts = first_by_arrival(accepted)
        decided = firsts.select(*DEDUP_COLUMNS)
        if _exists(spark, settings):
            listed = read_table(spark, FIRST_DELIVERIES, settings).select(*DEDUP_COLUMNS)
            firsts = firsts.join(listed.select("event_id"), "event_id", "left_anti")
            earlier = listed.join(
                accepted.select("event_id").distinct().hint(SHUFFLED), "event_id", "left_semi"
            )
            decided = firsts.select(*DEDUP_COLUMNS).unionByName(earlier)
        # Decided before either is written, so a retried chunk decides the same.
        firsts = firsts.localCheckpoint()
        again = (
            accepted.join(decided.hint(SHUFFLED), list(DEDUP_COLUMNS), "left_anti")
            .select(*POSITION, "event_id")
            .localCheckpoint()
        )
        writer = f"{BATCH}:first_deliveries:{query_id}"
        merge_once(
            again,
            REDELIVERIES,
            settings,
            writer,
            chunk_id,
            lambda m: m.whenNotMatchedInsertAll(),
            on=" AND ".join(f"t.{c} = s.{c}" for c in POSITION),
        )
        merge_once(
            firsts,
            FIRST_DELIVERIES,
            settings,
            writer,
            chunk_id,
            lambda m: m.whenNotMatchedInsertAll(),
            on="t.event_id = s.event_id",
        )

    if _exists(spark, settings) and not table_exists(spark, REDELIVERIES, settings):
        # Listed by a release that kept no redeliveries: both are derived from bronze alone,
        # so they are rebuilt from its start.
        _forget(spark, settings)
    try:
        each_new_chunk(spark, BRONZE, settings, FIRST_DELIVERIES, add)
    except StreamingQueryException as err:
        if BRONZE_REWRITTEN not in str(err):
            raise
        # Bronze was rewritten, not appended to (migrate-bronze): rebuilt from its start too.
        _forget(spark, settings)
        each_new_chunk(spark, BRONZE, settings, FIRST_DELIVERIES, add)


def _forget(spark: SparkSession, settings: Settings) -> None:
    for folder in (
        FIRST_DELIVERIES.path(settings),
        REDELIVERIES.path(settings),
        FIRST_DELIVERIES.checkpoint(f"from-{BRONZE.name}", settings),
    ):
        delete_folder(spark, folder)


def _exists(spark: SparkSession, settings: Settings) -> bool:
    return table_exists(spark, FIRST_DELIVERIES, settings)


def only_first_deliveries(events: DataFrame, redeliveries: DataFrame) -> DataFrame:
    """The accepted `events` (kafka_partition and kafka_offset among their columns) that are
    their id's first delivery: all but the listed redeliveries."""
    return events.join(redeliveries.select(*POSITION), list(POSITION), "left_anti")


def first_deliveries_from(
    spark: SparkSession, settings: Settings, raw: DataFrame, since: datetime, columns: Sequence[str]
) -> DataFrame:
    """The accepted events in bronze `raw` with an event_time from `since` on, each its id's
    first delivery (the table brought up to date first), with DEDUP_COLUMNS and `columns`."""
    # From bronze's newest version: at least all of `raw` (bronze is only appended to).
    update_first_deliveries(spark, settings)
    redeliveries = read_table(spark, REDELIVERIES, settings)
    tolerance = timedelta(seconds=settings.speed.future_tolerance_seconds)
    return (
        raw.where(F.col("kafka_timestamp") >= F.lit(since - tolerance))
        .transform(parse_events)
        .transform(validate_events, ValidationRules.of(settings))
        .transform(accepted_events)
        .select(*dict.fromkeys([*DEDUP_COLUMNS, *columns]))
        .transform(only_first_deliveries, redeliveries)
        .where(F.col("event_time") >= F.lit(since))
    )
