"""Event-time views, defined once for the speed, batch and replay layers.

Each function takes accepted events (silver's columns) and returns the view's rows. The
watermark decides elsewhere which events reach them (lakehouse.transforms.lateness).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from lakehouse.transforms.validate import AMOUNT_TYPE

TUMBLING = "1 minute"
SLIDING_MINUTES = 10  # one window starts every minute
SESSION_GAP_SECONDS = 30 * 60
MICROS_PER_MINUTE = 60_000_000


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
    a count of distinct users could not be added up. The windows are the same as
    `window(event_time, "10 minutes", "1 minute")`: every window that holds an event.

    Users are gathered once per minute and page. A window is then the union of the ten
    minute sets from its start on, read by a window function over each page's minutes in
    order, so every minute's set is shuffled once, not once per window it belongs to.
    """
    minute = F.floor(F.unix_micros("event_time") / MICROS_PER_MINUTE).alias("minute")
    # Each minute's set is sorted once: a window's ten sets then join into ten sorted runs,
    # which the final sort (a merge sort that finds runs) merges instead of sorting afresh.
    minutes = events.groupBy(minute, "page").agg(
        F.array_sort(F.collect_set("user_id")).alias("users"), F.count("*").alias("events")
    )
    # A window starts at each of the ten minutes up to one with events; starts without
    # events of their own get an empty row, so that every window has a row to be read at.
    back = F.explode(F.sequence(F.lit(0), F.lit(SLIDING_MINUTES - 1))).alias("back")
    own = F.col("back") == 0
    starts = (
        minutes.select("*", back)
        .select(
            "page",
            (F.col("minute") - F.col("back")).alias("start"),
            F.when(own, F.col("users")).alias("users"),
            F.when(own, F.col("events")).alias("events"),
        )
        # By page only: the window function below then needs no second shuffle.
        .repartition("page")
        .groupBy("page", "start")
        .agg(
            F.flatten(F.collect_list("users")).alias("users"),
            F.coalesce(F.sum("events"), F.lit(0).cast("long")).alias("events"),
        )
    )
    window = Window.partitionBy("page").orderBy("start").rangeBetween(0, SLIDING_MINUTES - 1)
    users = F.array_sort(F.array_distinct(F.flatten(F.collect_list("users").over(window))))
    return starts.select(
        F.timestamp_micros(F.col("start") * MICROS_PER_MINUTE).alias("window_start"),
        F.timestamp_micros((F.col("start") + SLIDING_MINUTES) * MICROS_PER_MINUTE).alias(
            "window_end"
        ),
        "page",
        users.alias("users"),
        # coalesce: the sum of counts is never null, and the schema says so.
        F.coalesce(F.sum("events").over(window), F.lit(0).cast("long")).alias("events"),
    ).transform(with_active_users)


def with_active_users(windows: DataFrame) -> DataFrame:
    """Windows with their user sets -> the view's columns: the number of users beside the set."""
    return windows.select(
        "window_start",
        "window_end",
        "page",
        "users",
        F.size("users").alias("active_users"),
        "events",
    )
