"""Instants crossing the Spark/Python border, always as aware UTC datetimes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# The times Tributary handles: [EARLIEST, END). Kafka timestamps cannot be before the epoch,
# and an end far below datetime's year 9999 leaves room for every lookback, tolerance and
# offset the layers add, so arithmetic on a handled time never overflows.
EARLIEST = EPOCH
END = datetime(3000, 1, 1, tzinfo=UTC)
HANDLED = "1970-01-01 to 2999-12-31 UTC"


class TimeRangeError(ValueError):
    """A time outside the range Tributary handles."""


def from_micros(micros: int) -> datetime:
    """Spark's unix_micros(...) as a datetime.

    Timestamps leave Spark as microseconds on purpose: collect() would turn them into naive
    datetimes in the Python process's local zone, whatever Spark's session zone is.
    """
    return EPOCH + timedelta(microseconds=micros)


def to_micros(moment: datetime) -> int:
    """An aware datetime as Spark's unix_micros: the inverse of from_micros."""
    return (moment - EPOCH) // timedelta(microseconds=1)


def as_utc(moment: datetime) -> datetime:
    """An aware UTC datetime; a naive one is taken as UTC (how the CLIs and Airflow mean it)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def handled(moment: datetime, shown: str | None = None) -> datetime:
    """`moment` as an aware UTC datetime; TimeRangeError, naming it as `shown` (default: its
    ISO text), when it is outside the times Tributary handles."""
    try:
        utc = as_utc(moment)
    except OverflowError:  # e.g. 0001-01-01T00:00+01:00 is before year 1 in UTC
        utc = None
    if utc is None or not EARLIEST <= utc < END:
        raise TimeRangeError(
            f"{shown or moment.isoformat()!r} is outside the times Tributary handles ({HANDLED})"
        )
    return utc


def parse_iso(text: str) -> datetime:
    """ISO-8601 text ("Z" or an offset; none means UTC) as an aware UTC datetime; ValueError
    when it is not one, TimeRangeError (a ValueError) when it is out of the handled range."""
    return handled(datetime.fromisoformat(text.replace("Z", "+00:00")), text)
