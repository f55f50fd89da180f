"""Event-time views, defined once for the speed, batch and replay layers.

Each function takes accepted events (silver's columns) and returns the view's rows. The
watermark decides elsewhere which events reach them (lakehouse.transforms.lateness).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse.transforms.validate import AMOUNT_TYPE

TUMBLING = "1 minute"
SLIDING_MINUTES, STEP_MINUTES = 10, 1
SESSION_GAP_SECONDS = 30 * 60


def count_events_per_minute(events: DataFrame) -> DataFrame:
    """(a) 1-minute tumbling windows per event_type: event count and amount sum."""
    return (
        events.groupBy(F.window("event_time", TUMBLING), "event_type")
        .agg(
            F.count("*").alias("events"),
            F.coalesce(F.sum("amount"), F.lit(0)).cast(AMOUNT_TYPE).alias("amount_sum"),
        )
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "event_type",
            "events",
            "amount_sum",
        )
    )


def active_users_per_page(events: DataFrame) -> DataFrame:
    """(b) 10-minute windows sliding every minute, per page: the distinct users, and events.

    The user set itself is kept (sorted) so two partial results combine exactly by union;
    a count of distinct users could not be added up. Users are first gathered per minute
    and page, then each minute's set goes to the ten windows that contain that minute: the
    same windows as `window(event_time, "10 minutes", "1 minute")`, with ten copies of a
    minute's summary instead of ten copies of every event.
    """
    # Each minute's set is sorted once: a window's ten sets then join into ten sorted runs,
    # which the final sort (a merge sort that finds runs) merges instead of sorting afresh.
    minutes = events.groupBy(F.window("event_time", TUMBLING).start.alias("minute"), "page").agg(
        F.array_sort(F.collect_set("user_id")).alias("users"), F.count("*").alias("events")
    )
    steps = SLIDING_MINUTES // STEP_MINUTES
    spread = minutes.withColumn("k", F.explode(F.sequence(F.lit(0), F.lit(steps - 1)))).withColumn(
        "window_start", F.col("minute") - F.make_interval(mins=F.col("k") * STEP_MINUTES)
    )
    return (
        spread.groupBy("window_start", "page")
        .agg(
            F.array_sort(F.array_distinct(F.flatten(F.collect_list("users")))).alias("users"),
            # coalesce: the sum of counts is never null, and the schema says so.
            F.coalesce(F.sum("events"), F.lit(0).cast("long")).alias("events"),
        )
        .select(
            "window_start",
            (F.col("window_start") + F.make_interval(mins=F.lit(SLIDING_MINUTES))).alias(
                "window_end"
            ),
            "page",
            "users",
            F.size("users").alias("active_users"),
            "events",
        )
    )
