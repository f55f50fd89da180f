"""The serving layer's seam: which instants the batch layer covers, and which side serves."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from lakehouse.core.frames import rows_frame
from lakehouse.serving.serve import Coverage, RunCoverage, coverage_of, merge_ranges

HOUR = timedelta(hours=1)


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


def minute(hour: int, m: int) -> datetime:
    return datetime(2026, 11, 26, hour, m, tzinfo=UTC)


def test_a_rerun_that_makes_less_final_replaces_the_earlier_run() -> None:
    # The first run of 05:00-06:00 had every session closed before 05:15; a late event then
    # joined a 05:09 session to one still open, so the rerun is final only up to 05:09. The
    # 05:09 session must not be served from the batch (speed serves from 05:09 on).
    first = RunCoverage(at(5), at(6), minute(5, 15), table_version=3)
    rerun = RunCoverage(at(5), at(6), minute(5, 9), table_version=7)
    assert coverage_of([rerun, first]) == [(at(5), minute(5, 9))]


def test_a_later_hourly_run_replaces_only_its_hour_of_a_daily_run() -> None:
    daily = RunCoverage(at(0), at(23), at(23), table_version=1)
    hourly = RunCoverage(at(5), at(6), minute(5, 30), table_version=2)
    assert coverage_of([daily, hourly]) == [(at(0), minute(5, 30)), (at(6), at(23))]
    # The other way round the daily run, written last, replaced the hour's rows.
    assert coverage_of([replace(daily, table_version=3), hourly]) == [(at(0), at(23))]


def test_runs_of_adjacent_intervals_join_up() -> None:
    runs = [RunCoverage(at(h), at(h + 1), at(h + 1), table_version=h) for h in (2, 3, 4)]
    assert coverage_of(runs) == [(at(2), at(5))]
    assert coverage_of([]) == []


def test_a_year_of_hourly_runs_is_one_range() -> None:
    # Each run splits every range before it in two: empty pieces must not pile up (they
    # doubled with every run, and 30 runs took a reconciliation to 16 GB).
    first = datetime(2026, 1, 1, tzinfo=UTC)
    runs = [
        RunCoverage(first + h * HOUR, first + (h + 1) * HOUR, first + (h + 1) * HOUR, h)
        for h in range(24 * 365)
    ]
    assert coverage_of(runs) == [(first, first + 24 * 365 * HOUR)]


def test_high_water_is_the_end_of_the_last_range() -> None:
    assert Coverage([(at(0), at(2)), (at(3), at(6))], 4).high_water == at(6)
    assert Coverage([], None).high_water is None


def test_contains_is_half_open_and_leaves_gaps_to_speed(spark) -> None:
    coverage = Coverage([(at(0), at(2)), (at(3), at(4))], 1)
    df = rows_frame(spark, [(at(h),) for h in range(6)], "t timestamp")
    inside = df.where(coverage.contains("t")).selectExpr("hour(t) AS h")
    assert sorted(r["h"] for r in inside.collect()) == [0, 1, 3]


def test_no_coverage_contains_nothing(spark) -> None:
    df = rows_frame(spark, [(at(1),)], "t timestamp")
    assert df.where(Coverage([], None).contains("t")).count() == 0


@pytest.mark.slow  # a batch run and its vacuum
def test_a_batch_layer_paused_for_a_week_is_still_served(spark, local_settings) -> None:
    """Serving reads a batch view as its last run left it. The run's vacuum commits after
    that, so it is not the table's latest version, and after a week without a batch run (kappa
    mode for a while, a paused DAG) Delta 4 would refuse by default to read it (older than the
    table's deletedFileRetentionDuration): every lambda query would fail. The batch layer reads
    bronze alone, so the records are written there as the stream writes them, and nothing
    else of the stream's is needed."""
    from datetime import timedelta

    from lakehouse.batch.recompute import Interval, recompute_interval
    from lakehouse.core.delta_io import append_once, read_table, table_version
    from lakehouse.core.tables import table
    from lakehouse.generator.clickstream import generate_events
    from lakehouse.serving.serve import serve
    from lakehouse.transforms.bronze import to_raw_records
    from tests.delta_files import age_commits
    from tests.micro_batches import kafka_records

    now = datetime.now(UTC)
    hour = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    events = [
        *generate_events(60, seed=6, start=hour, users=4),
        *generate_events(30, seed=7, start=hour + timedelta(hours=2), users=4),
    ]
    records = kafka_records(spark, events, 0).transform(to_raw_records)
    append_once(records, table("bronze.events_raw"), local_settings, "speed", 0)
    interval = Interval.checked(hour, hour + timedelta(hours=1), now)
    # No retention: the new tables are vacuumed at the end of the run at once.
    batch = local_settings.batch.model_copy(update={"vacuum_after_hours": 0})
    vacuuming = local_settings.model_copy(update={"batch": batch})
    run = recompute_interval(spark, vacuuming, interval, "paused-for-a-week")
    counts = table("batch.event_counts_1m")
    [result] = [r for r in run.views if r.view == "event_counts_1m"]
    assert result.table_version < (table_version(spark, counts, local_settings) or 0), "vacuumed"
    for name in ("batch.event_counts_1m", "ops.batch_runs"):
        age_commits(table(name).path(local_settings), days=8)

    served, coverage = serve(spark, local_settings, "event_counts_1m", mode="lambda")

    assert coverage.high_water == interval.end
    from_batch = served.where("source = 'batch'").drop("source").collect()
    assert sorted(from_batch) == sorted(read_table(spark, counts, local_settings).collect())
    assert sum(r["events"] for r in from_batch) == 60
