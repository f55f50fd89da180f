"""Instants crossing the Spark/Python border, always as aware UTC datetimes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def from_micros(micros: int) -> datetime:
    """Spark's unix_micros(...) as a datetime.

    Timestamps leave Spark as microseconds on purpose: collect() would turn them into naive
    datetimes in the Python process's local zone, whatever Spark's session zone is.
    """
    return EPOCH + timedelta(microseconds=micros)


def as_utc(moment: datetime) -> datetime:
    """An aware UTC datetime; a naive one is taken as UTC (how the CLIs and Airflow mean it)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def parse_iso(text: str) -> datetime:
    """ISO-8601 text ("Z" or an offset; none means UTC) as an aware UTC datetime; ValueError
    when it is not one."""
    return as_utc(datetime.fromisoformat(text.replace("Z", "+00:00")))
