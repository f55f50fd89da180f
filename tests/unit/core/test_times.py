"""The one range of times Tributary handles, and how ISO text and CLI arguments meet it."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from jobs.arguments import iso_moment
from lakehouse.core.times import END, EPOCH, TimeRangeError, handled, parse_iso


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1970-01-01T00:00Z", EPOCH),
        ("2026-11-25T10:00", datetime(2026, 11, 25, 10, tzinfo=UTC)),
        ("2026-11-25T12:00+02:00", datetime(2026, 11, 25, 10, tzinfo=UTC)),
        ("2999-12-31T23:59:59.999999Z", END - timedelta(microseconds=1)),
    ],
)
def test_times_in_the_range_parse_as_utc(text: str, expected: datetime) -> None:
    assert parse_iso(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "0001-01-01T00:00+01:00",  # before year 1 in UTC: datetime itself overflows
        "9999-12-31T23:00-05:00",  # after year 9999 in UTC
        "0001-01-01T00:00Z",
        "1969-12-31T23:59:59Z",  # Kafka timestamps cannot be before the epoch
        "3000-01-01T00:00Z",
    ],
)
def test_times_out_of_the_range_are_refused_with_their_text(text: str) -> None:
    message = re.escape(f"'{text}' is outside the times Tributary handles")
    with pytest.raises(TimeRangeError, match=message):
        parse_iso(text)
    with pytest.raises(argparse.ArgumentTypeError, match="1970-01-01 to 2999-12-31 UTC"):
        iso_moment(text)


def test_text_that_is_no_time_says_so() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="is not an ISO-8601 time"):
        iso_moment("yesterday")


def test_handled_takes_datetimes_naive_as_utc() -> None:
    assert handled(datetime(2026, 1, 1)) == datetime(2026, 1, 1, tzinfo=UTC)
    early = datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1)))
    with pytest.raises(TimeRangeError, match="outside the times"):
        handled(early)
