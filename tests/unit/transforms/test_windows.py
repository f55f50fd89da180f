from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

from pyspark.sql import functions as F

from lakehouse.core.frames import rows_frame
from lakehouse.transforms.windows import active_users_per_page, count_events_per_minute

SCHEMA = (
    "event_type string, user_id string, page string, amount decimal(18,2), event_time timestamp"
)


def ts(text: str) -> datetime:
    return datetime.fromisoformat(f"2026-03-01T{text}")


def events(spark, *rows):
    return rows_frame(spark, list(rows), SCHEMA)


def test_one_minute_counts_and_exact_amount_sums_per_type(spark) -> None:
    df = events(
        spark,
        ("purchase", "u1", "/", Decimal("0.10"), ts("10:00:01")),
        ("purchase", "u2", "/", Decimal("0.20"), ts("10:00:59.999")),
        ("click", "u1", "/", None, ts("10:00:30")),
        ("purchase", "u1", "/", Decimal("5.00"), ts("10:01:00")),  # next window: end exclusive
    )
    got = {
        (r["window_start"].strftime("%H:%M"), r["event_type"]): (r["events"], r["amount_sum"])
        for r in count_events_per_minute(df).collect()
    }
    assert got == {
        ("10:00", "purchase"): (2, Decimal("0.30")),
        ("10:00", "click"): (1, Decimal("0.00")),
        ("10:01", "purchase"): (1, Decimal("5.00")),
    }


def test_sliding_windows_count_distinct_users_per_page(spark) -> None:
    df = events(
        spark,
        ("click", "u1", "/cart", None, ts("10:00:30")),
        ("click", "u1", "/cart", None, ts("10:05:00")),
        ("click", "u2", "/cart", None, ts("10:09:59")),
    )
    rows = {r["window_start"].strftime("%H:%M"): r for r in active_users_per_page(df).collect()}
    # 10:00:30 lies in the ten windows starting 09:51 .. 10:00.
    assert rows["10:00"]["users"] == ["u1", "u2"] and rows["10:00"]["active_users"] == 2
    assert rows["10:00"]["events"] == 3
    assert rows["09:51"]["users"] == ["u1"]
    assert rows["10:09"]["users"] == ["u2"] and rows["10:09"]["window_end"] == ts("10:19:00")
    assert len(rows) == 19  # windows starting 09:51 .. 10:09


def test_sliding_windows_equal_sparks_own_sliding_window(spark) -> None:
    # Pages with gaps of several minutes, a page with a single event, and windows crossing
    # midnight: every window Spark's window() has, with the same users and counts.
    rows = [
        ("click", f"u{(i * 7) % 5}", page, None, datetime(2026, 3, 1, 23, 50) + delta)
        for i, (page, delta) in enumerate(
            [
                ("/", timedelta(minutes=m, seconds=s))
                for m in (0, 1, 1, 4, 13, 14, 29)
                for s in (0, 59)
            ]
            + [("/cart", timedelta(minutes=11, seconds=30))]
        )
    ]
    df = events(spark, *rows)
    expected = (
        df.groupBy(F.window("event_time", "10 minutes", "1 minute"), "page")
        .agg(F.array_sort(F.collect_set("user_id")).alias("users"), F.count("*").alias("events"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "page",
            "users",
            F.size("users").alias("active_users"),
            "events",
        )
    )
    got = active_users_per_page(df)
    assert sorted(got.collect()) == sorted(expected.collect())
    assert got.count() == expected.count() > 30
