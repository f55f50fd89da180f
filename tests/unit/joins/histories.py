"""The dimensions' history tables as the changelog stream leaves them, built by hand for the
joins' tests: versions of a captured table's rows on a clock of minutes after T0."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from lakehouse.cdc.changelog import history_table
from lakehouse.cdc.shop import CapturedTable
from lakehouse.core.frames import rows_frame

T0 = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def version(captured: CapturedTable, values: tuple, start: float, end: float | None, lsn: int):
    """A version of a row of `captured` (its columns' `values`) valid from minute `start` to
    `end` (None: current), committed at `lsn`."""
    return (
        *values,
        at(start),
        at(start),
        None if end is None else at(end),
        end is None,
        False,
        lsn,
        None if end is None else lsn + 1,
    )


def write_history(spark, settings, captured: CapturedTable, versions: list[tuple]) -> None:
    """The history table as the changelog stream would leave it: a new version of it."""
    target = history_table(captured)
    frame = rows_frame(spark, versions, target.spark_schema())
    frame.write.format("delta").mode("overwrite").save(target.path(settings))
