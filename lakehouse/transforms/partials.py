"""Combining a view's partial rows into its rows.

The speed layer appends each micro-batch's view rows as they are (one commit, no read of the
view), so a key may have a row from every batch whose events reached it. Combining is the same
operation as computing the view from all those events at once, and it is idempotent: rows that
are already combined combine to themselves. So readers combine whatever they read, and a fold
may replace any set of partial rows by their combination at any time without changing a
reader's result.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse.transforms.sessions import merge_sessions
from lakehouse.transforms.validate import AMOUNT_TYPE
from lakehouse.transforms.windows import with_active_users


def combine_counts(rows: DataFrame) -> DataFrame:
    """event_counts_1m: a window's counts and amounts add up."""
    return rows.groupBy("window_start", "window_end", "event_type").agg(
        F.sum("events").alias("events"),
        F.sum("amount_sum").cast(AMOUNT_TYPE).alias("amount_sum"),
    )


def combine_active_users(rows: DataFrame) -> DataFrame:
    """active_users_10m: a window's user sets unite (which is why the view keeps them)."""
    users = F.array_sort(F.array_distinct(F.flatten(F.collect_list("users"))))
    return (
        rows.groupBy("window_start", "window_end", "page")
        .agg(users.alias("users"), F.sum("events").alias("events"))
        .transform(with_active_users)
    )


def combine_sessions(rows: DataFrame) -> DataFrame:
    """user_sessions: pieces of a user's sessions less than the gap apart join into one."""
    return merge_sessions(
        rows.select("user_id", "session_start", "session_end", "events", "revenue")
    )
