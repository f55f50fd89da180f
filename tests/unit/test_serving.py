"""The serving layer's seam: which instants the batch layer covers, and which side serves."""

from __future__ import annotations

from datetime import UTC, datetime

from lakehouse.serving import Coverage, merge_ranges


def at(hour: int) -> datetime:
    return datetime(2026, 11, 26, hour, tzinfo=UTC)


def test_touching_and_overlapping_ranges_merge() -> None:
    assert merge_ranges([(at(3), at(5)), (at(0), at(1)), (at(1), at(2)), (at(4), at(6))]) == [
        (at(0), at(2)),
        (at(3), at(6)),
    ]


def test_empty_ranges_are_dropped() -> None:
    # A run whose results are not final yet covers nothing.
    assert merge_ranges([(at(2), at(2)), (at(5), at(4))]) == []


def test_high_water_is_the_end_of_the_last_range() -> None:
    assert Coverage([(at(0), at(2)), (at(3), at(6))], 4).high_water == at(6)
    assert Coverage([], None).high_water is None


def test_contains_is_half_open_and_leaves_gaps_to_speed(spark) -> None:
    coverage = Coverage([(at(0), at(2)), (at(3), at(4))], 1)
    df = spark.createDataFrame([(at(h),) for h in range(6)], "t timestamp")
    inside = df.where(coverage.contains("t")).selectExpr("hour(t) AS h")
    assert sorted(r["h"] for r in inside.collect()) == [0, 1, 3]


def test_no_coverage_contains_nothing(spark) -> None:
    df = spark.createDataFrame([(at(1),)], "t timestamp")
    assert df.where(Coverage([], None).contains("t")).count() == 0
