"""The watermark: which events may still change a window, and which arrived too late.

Watermark = newest on-time event_time seen so far minus the allowed lateness. An event older
than the watermark in force when its micro-batch started is late: every window it belongs to
(1-minute, 10-minute sliding, or a session it could extend) has already been closed, so it
goes to speed.late_events and the views stay final. One rule for every view keeps
`batch = speed + late` true window by window.

Watermarks travel as microseconds since the epoch (UTC): no time zone can shift them between
Spark and Python.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F


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


def advance_watermark(
    current: int | None, newest_on_time: int | None, allowed_lateness_seconds: int
) -> int | None:
    """The next watermark, in microseconds; it never moves back."""
    if newest_on_time is None:
        return current
    candidate = newest_on_time - allowed_lateness_seconds * 1_000_000
    return candidate if current is None or candidate > current else current
