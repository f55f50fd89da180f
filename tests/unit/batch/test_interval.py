"""Which intervals the batch layer accepts, and the SQL that places rows in one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from lakehouse.batch.recompute import Interval, IntervalError
from lakehouse.core.frames import rows_frame

NOW = datetime(2026, 11, 26, 12, 30, tzinfo=UTC)


def at(hour: int, minute: int = 0, second: int = 0) -> datetime:
    return datetime(2026, 11, 26, hour, minute, second, tzinfo=UTC)


def test_a_closed_whole_minute_interval_is_accepted() -> None:
    interval = Interval.checked(at(10), at(11), NOW)
    assert (interval.start, interval.end) == (at(10), at(11))
    assert str(interval) == "[2026-11-26T10:00Z, 2026-11-26T11:00Z)"


def test_a_naive_time_is_taken_as_utc() -> None:
    interval = Interval.checked(datetime(2026, 11, 26, 10), datetime(2026, 11, 26, 11), NOW)
    assert interval.start == at(10)


def test_other_zones_are_converted_to_utc() -> None:
    noon_plus_two = datetime(2026, 11, 26, 12, tzinfo=timezone(timedelta(hours=2)))
    interval = Interval.checked(noon_plus_two, at(11), NOW)
    assert interval.start == at(10) and interval.start.tzinfo == UTC


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        (at(11), at(10), "empty or reversed"),
        (at(10), at(10), "empty or reversed"),
        (at(12), at(13), "ends in the future"),
        (at(10, 0, 30), at(11), "not a whole minute"),
        (at(10), at(10, 59, 59), "not a whole minute"),
    ],
)
def test_a_bad_interval_says_why(start: datetime, end: datetime, message: str) -> None:
    with pytest.raises(IntervalError, match=message):
        Interval.checked(start, end, NOW)


@pytest.mark.parametrize(
    ("start", "end"),
    [
        (datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1))), at(11)),  # overflows in UTC
        (datetime(1, 1, 1, tzinfo=UTC), at(11)),  # recompute_interval's lookback would overflow
        (datetime(1969, 12, 31, 23, tzinfo=UTC), at(11)),
    ],
    ids=["year-0-in-utc", "year-1", "before-the-epoch"],
)
def test_times_tributary_does_not_handle_are_refused(start: datetime, end: datetime) -> None:
    with pytest.raises(IntervalError, match=r"start .* is outside the times Tributary handles"):
        Interval.checked(start, end, NOW)
    # Built directly, as DAGs and jobs do, too: not later, half-way through a Spark job.
    with pytest.raises(IntervalError, match="outside the times Tributary handles"):
        Interval(start, end)


def test_condition_is_half_open(spark) -> None:
    interval = Interval.checked(at(10), at(11), NOW)
    df = rows_frame(
        spark, [(at(9, 59, 59),), (at(10),), (at(10, 59, 59),), (at(11),)], "t timestamp"
    )
    inside = df.where(interval.condition("t")).selectExpr("date_format(t, 'HH:mm:ss') AS t")
    assert [r["t"] for r in inside.collect()] == ["10:00:00", "10:59:59"]
