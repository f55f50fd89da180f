from __future__ import annotations

from datetime import UTC, datetime

from lakehouse.core.frames import rows_frame
from lakehouse.transforms.lateness import advance_watermark, late_events, on_time_events

MICROS = 1_000_000


def micros(text: str) -> int:
    return int(datetime.fromisoformat(f"2026-03-01T{text}+00:00").timestamp() * MICROS)


def test_events_before_the_watermark_are_late_and_the_rest_on_time(spark) -> None:
    df = rows_frame(
        spark,
        [(datetime(2026, 3, 1, 9, 59, 59, tzinfo=UTC),), (datetime(2026, 3, 1, 10, tzinfo=UTC),)],
        "event_time timestamp",
    )
    wm = micros("10:00:00")
    assert late_events(df, wm).count() == 1
    assert on_time_events(df, wm).count() == 1, "an event exactly at the watermark is on time"


def test_before_any_watermark_nothing_is_late(spark) -> None:
    df = rows_frame(spark, [(datetime(2000, 1, 1, tzinfo=UTC),)], "event_time timestamp")
    assert late_events(df, None).count() == 0 and on_time_events(df, None).count() == 1


def test_the_watermark_trails_the_newest_event_and_never_moves_back() -> None:
    first = advance_watermark(None, micros("10:10:00"), allowed_lateness_seconds=600)
    assert first == micros("10:00:00")
    assert advance_watermark(first, micros("10:05:00"), 600) == first
    assert advance_watermark(first, None, 600) == first
    assert advance_watermark(first, micros("10:20:00"), 600) == micros("10:10:00")
