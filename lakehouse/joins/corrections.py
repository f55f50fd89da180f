"""How an enrichment batch finds the earlier events a dimension change may re-enrich, through
Spark: the changed keys and from when on they bear (measured_starts), the earlier rows that
may hold their events (earlier_rows), each event's latest row (latest_rows). The driver's way,
while the rows are few, is lakehouse.joins.corrections_arrow."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

from pyspark.sql import Observation, Window
from pyspark.sql import functions as F

from lakehouse.core.delta_io import read_table
from lakehouse.core.times import from_micros
from lakehouse.joins.dimensions import DIMENSIONS
from lakehouse.transforms.as_of import UNKNOWN, Dimension
from lakehouse.transforms.enrichment import change_starts

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from lakehouse.core.config import Settings
    from lakehouse.core.tables import Table


class Correction(NamedTuple):
    """The earlier events a correcting batch enriches again: their latest rows, found through
    Spark (`before`, locally checkpointed) or on the driver (`before_rows`)."""

    before: DataFrame | None
    before_rows: pa.Table | None


class Changed(NamedTuple):
    """A dimension's changed keys, each from when on its events may change (change_starts:
    locally checkpointed, or found on the driver, then `rows` too), with the earliest of those
    instants (micros; None: no key changed) and whether a key that had no version at all is
    among them."""

    starts: DataFrame
    since: int | None
    new_keys: bool
    rows: pa.Table | None = None


def measured_starts(now: DataFrame, was: DataFrame, dimension: Dimension) -> Changed:
    """change_starts(now, was, dimension), its earliest start and new keys observed while its
    checkpoint computes it: no Spark job of their own."""
    observed = Observation()
    starts = (
        change_starts(now, was, dimension)
        .observe(
            observed,
            F.min(F.unix_micros("_from")).alias("since"),
            F.max(F.col("_new").cast("int")).alias("new_keys"),
        )
        .localCheckpoint()
    )
    found = observed.get
    return Changed(starts, found["since"], bool(found["new_keys"]))


def earlier_rows(
    spark: SparkSession,
    settings: Settings,
    enriched: Table,
    batch_id: int,
    changes: Mapping[str, Changed],
) -> DataFrame | None:
    """The rows batches before `batch_id` wrote to `enriched` that may hold an event the
    `changes` bear on: every row of every event from the earliest such event's time on; None
    when the changes bear on no event.

    That time is the least start of a changed key (change_starts); or earlier, the oldest
    `unknown` event of a key that had no version at all before the change, whose events are
    `unknown` at any time. A key that had a version has no event whose latest row is
    `unknown`: the latest rows are the enrichment with the previous batch's history."""
    earlier = read_table(spark, enriched, settings).where(F.col("enriched_batch") < batch_id)
    bounds = [c.since for c in changes.values() if c.since is not None]
    for name, changed in changes.items():
        if changed.new_keys:
            dimension = DIMENSIONS[name][0]
            keys = changed.starts.where("_new").select(F.col("_key").alias(dimension.event_key))
            [[oldest]] = (
                earlier.where(F.col(dimension.status_column) == UNKNOWN)
                .join(F.broadcast(keys), dimension.event_key, "left_semi")
                .agg(F.min(F.unix_micros("event_time")))
                .collect()
            )
            bounds += [] if oldest is None else [oldest]
    if not bounds:
        return None
    since = from_micros(min(bounds))
    # All rows of an event have its event time, so an event keeps all its rows or none
    # (latest_rows needs them all); Delta skips the partitions and files that end before.
    return earlier.where(
        (F.col("event_date") >= F.lit(since.date())) & (F.col("event_time") >= F.lit(since))
    )


def latest_rows(enriched: DataFrame) -> DataFrame:
    """Each event's latest row of silver.events_enriched (its highest enriched_batch)."""
    last = Window.partitionBy("event_id").orderBy(F.col("enriched_batch").desc())
    return enriched.withColumn("_n", F.row_number().over(last)).where("_n = 1").drop("_n")
