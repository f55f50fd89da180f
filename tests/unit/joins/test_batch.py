"""The batch layer's revenue view on a local lakehouse: batch.revenue_by_segment recomputed from
bronze (first deliveries, late events included) and the history tables, exactly the interval's
hour windows, each event as of its own time; a rerun takes in a dimension change captured
since; the run is recorded for the serving layer, whose seam serves the batch's final windows
and the stream's summed partial rows after them."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

import pytest

from jobs.contract import Exit, read_result
from lakehouse.batch.recompute import Interval, NoDataError
from lakehouse.batch.unchanged import last_run_of
from lakehouse.cdc.shop import PRODUCTS, USERS
from lakehouse.core.delta_io import append_once, read_table, table_exists
from lakehouse.core.frames import rows_frame
from lakehouse.core.tables import table
from lakehouse.joins.batch import REVENUE, recompute_revenue, revenue_unchanged
from lakehouse.serving.serve import register_serving_views, serve
from lakehouse.transforms.bronze import to_raw_records
from tests.jobs_in_process import batch_job_without_spark
from tests.lakehouses import job_env, local_lakehouse
from tests.micro_batches import kafka_records
from tests.unit.joins.histories import at, version, write_history

pytestmark = pytest.mark.slow  # make test-fast leaves it out (docs/testing.md)

RUNS = table("ops.batch_runs")
SPEED = table("speed.revenue_by_segment")
HOURS = Interval(at(0), at(120))  # 10:00 to 12:00


def event(event_id: str, user: str, minute: float, kind="purchase", product=None, amount=None):
    fields = {
        "event_id": event_id,
        "event_type": kind,
        "user_id": user,
        "page": "/p",
        "event_time": f"{at(minute):%Y-%m-%dT%H:%M:%S}Z",
    }
    if product is not None:
        fields["product_id"] = product
    if amount is not None:
        fields["amount"] = amount
    return (user, fields)


EVENTS = [
    event("e1", "u1", 10, product="p1", amount=10),  # u1 new, p1 kitchen
    event("e2", "u1", 40, product="p1", amount=10),  # u1 gold since minute 30
    event("e3", "u2", 2, product="p2", amount=10),  # p2 only from minute 5: not_yet
    event("e4", "u2", 75, product="p2", amount=7.5),  # hour 11: new, garden
    event("e1", "u1", 10, product="p1", amount=10),  # a second delivery: counted once
    event("v1", "u1", 20, kind="page_view"),  # not a purchase
    event("e0", "u1", -10, product="p1", amount=10),  # hour 9: not the interval's
    event("e9", "u2", 125, product="p1", amount=10),  # hour 12: not the interval's
    # Enough newer events to support a watermark at 12:30 (speed.watermark_support_events).
    *[event(f"w{i}", "u3", 150, kind="page_view") for i in range(6)],
    # After those in the log: the speed layer would find it late; the batch counts it.
    event("late", "u2", 50, product="p1", amount=5),
]


def wall(minute: float) -> datetime:
    """at(minute) as Spark hands a timestamp back: naive, in the session's zone (UTC)."""
    return at(minute).replace(tzinfo=None)


def kept(spark, settings) -> set[tuple]:
    return {
        (r["window_start"], r["segment"], r["category"], r["purchases"], r["revenue"])
        for r in read_table(spark, REVENUE, settings).collect()
    }


@pytest.fixture
def lake(spark, tmp_path):
    settings = local_lakehouse(tmp_path)
    write_history(
        spark,
        settings,
        USERS,
        [
            version(USERS, ("u1", "new", "DE"), 0, 30, 10),
            version(USERS, ("u1", "gold", "DE"), 30, None, 30),
            version(USERS, ("u2", "new", "FR"), -60, None, 11),
        ],
    )
    write_history(
        spark,
        settings,
        PRODUCTS,
        [
            version(PRODUCTS, ("p1", "Mug", "kitchen", Decimal("4.00")), -60, None, 20),
            version(PRODUCTS, ("p2", "Rake", "garden", Decimal("9.00")), 5, None, 25),
        ],
    )
    records = kafka_records(spark, EVENTS, 0).transform(to_raw_records)
    append_once(records, table("bronze.events_raw"), settings, "speed", 0)
    return settings


def test_the_interval_s_windows_are_recomputed_as_of_each_event_s_time(spark, lake) -> None:
    settings = lake
    run = recompute_revenue(spark, settings, HOURS, "run-1")

    ten, eleven = wall(0), wall(60)
    assert kept(spark, settings) == {
        (ten, "new", "kitchen", 2, Decimal("15.00")),  # e1 and the late event
        (ten, "gold", "kitchen", 1, Decimal("10.00")),
        (ten, "new", "(not_yet)", 1, Decimal("10.00")),
        (eleven, "new", "garden", 1, Decimal("7.50")),
    }
    assert (run.events, run.rows) == (6, 4)  # e1 (once), e2, e3, e4, v1 and the late one
    lateness = timedelta(seconds=settings.speed.allowed_lateness_seconds)
    assert run.watermark == at(150) - lateness
    # A window is final once the watermark passed its end.
    assert run.final_until == min(HOURS.end, at(150) - lateness - timedelta(hours=1))
    [record] = read_table(spark, RUNS, settings).collect()
    assert (record["view"], record["run_id"], record["final_until"]) == (
        "revenue_by_segment",
        "run-1",
        run.final_until.replace(tzinfo=None),
    )
    # The click views' own no-op check does not take this record for a run of theirs.
    assert last_run_of(settings, HOURS) is None


def test_a_rerun_takes_in_a_dimension_change_captured_since(spark, lake) -> None:
    settings = lake
    recompute_revenue(spark, settings, HOURS, "run-1")
    # The changelog catches up: u2 was a vip from the start (a later LSN rewrote the row).
    write_history(spark, settings, USERS, [version(USERS, ("u2", "vip", "FR"), -60, None, 40)])
    again = recompute_revenue(spark, settings, HOURS, "run-2")

    ten, eleven = wall(0), wall(60)
    assert kept(spark, settings) == {
        (ten, "(unknown)", "kitchen", 2, Decimal("20.00")),  # u1 is in no history now
        (ten, "vip", "kitchen", 1, Decimal("5.00")),
        (ten, "vip", "(not_yet)", 1, Decimal("10.00")),
        (eleven, "vip", "garden", 1, Decimal("7.50")),
    }
    assert again.pins["users"] == 1  # the history's second version
    assert read_table(spark, RUNS, settings).count() == 2


def test_a_rerun_that_would_change_nothing_stands_on_the_last_run_until_an_input_moves(
    spark, lake, run_job_here, monkeypatch, tmp_path
) -> None:
    """A final hour's rerun, bronze and both histories as its last run read them, recomputes
    nothing: the job says so before it starts Spark and names the run that stands. A history
    change, or a record appended to bronze, makes the next run recompute; so does --force."""
    settings = lake
    hour = Interval(at(0), at(60))  # final: the watermark passed 11:00
    recompute_revenue(spark, settings, hour, "run-1")
    assert revenue_unchanged(settings, hour) == "run-1"
    env = job_env(settings, tmp_path / "state")
    ran = batch_job_without_spark(
        run_job_here, monkeypatch, "jobs.batch_revenue", (hour.start, hour.end), env
    )
    assert ran.returncode == Exit.NOTHING_TO_DO, ran.stderr
    assert "unchanged since run run-1 (bronze and the history tables" in ran.stderr
    said = read_result("batch_revenue", ran.stdout.splitlines())
    assert said == {"interval": str(hour), "standing_run": "run-1"}

    write_history(spark, settings, USERS, [version(USERS, ("u1", "vip", "DE"), -60, None, 40)])
    assert revenue_unchanged(settings, hour) is None
    recompute_revenue(spark, settings, hour, "run-2")
    assert revenue_unchanged(settings, hour) == "run-2"
    again = kafka_records(spark, [event("e5", "u1", 15, product="p1", amount=1)], 100)
    append_once(again.transform(to_raw_records), table("bronze.events_raw"), settings, "speed", 1)
    assert revenue_unchanged(settings, hour) is None
    # An interval whose windows are not all final is recomputed each time.
    recompute_revenue(spark, settings, HOURS, "run-3")
    assert revenue_unchanged(settings, HOURS) is None

    forced = run_job_here(
        "jobs.batch_revenue",
        *("--start", hour.start.isoformat(), "--end", hour.end.isoformat(), "--force"),
        **job_env(settings, tmp_path / "state"),
    )
    assert forced.returncode == Exit.OK, forced.stderr
    assert revenue_unchanged(settings, hour) is not None


def test_an_interval_without_events_writes_nothing(spark, lake) -> None:
    settings = lake
    empty = Interval(at(-180), at(-120))
    with pytest.raises(NoDataError, match="no accepted event"):
        recompute_revenue(spark, settings, empty, "run-empty")
    assert not table_exists(spark, REVENUE, settings)
    assert not table_exists(spark, RUNS, settings)


def test_serving_gives_the_batch_s_final_windows_and_the_stream_s_after(spark, lake) -> None:
    settings = lake
    run = recompute_revenue(spark, settings, Interval(at(0), at(60)), "run-10h")
    assert run.final_until == at(60)  # the 10:00 window is final
    partials = [
        # The stream's own figures for 10:00 differ: the batch serves that window.
        (at(0), at(60), "new", "kitchen", 5, Decimal("50.00"), 0),
        # 11:00: two batches' partial rows, summed; a correction that empties a key.
        (at(60), at(120), "new", "garden", 1, Decimal("7.50"), 0),
        (at(60), at(120), "new", "garden", 2, Decimal("5.00"), 1),
        (at(60), at(120), "(unknown)", "garden", 1, Decimal("3.00"), 0),
        (at(60), at(120), "(unknown)", "garden", -1, Decimal("-3.00"), 1),
    ]
    append_once(rows_frame(spark, partials, SPEED.spark_schema()), SPEED, settings, "enrich", 0)

    served, coverage = serve(spark, settings, "revenue_by_segment", mode="lambda")

    rows = {
        (r["window_start"], r["segment"], r["category"], r["purchases"], r["revenue"], r["source"])
        for r in served.collect()
    }
    assert rows == {
        (wall(0), "new", "kitchen", 2, Decimal("15.00"), "batch"),
        (wall(0), "gold", "kitchen", 1, Decimal("10.00"), "batch"),
        (wall(0), "new", "(not_yet)", 1, Decimal("10.00"), "batch"),
        (wall(60), "new", "garden", 3, Decimal("12.50"), "speed"),
    }
    assert coverage.high_water == at(60)
    # Kappa mode has no batch layer: the stream serves every window.
    kappa, _ = serve(spark, settings, "revenue_by_segment", mode="kappa")
    assert {r["source"] for r in kappa.collect()} == {"speed"}
    assert kappa.where("window_start = timestamp'2026-11-25 10:00:00'").count() == 1
    names, _ = register_serving_views(spark, settings)
    assert "serving_revenue_by_segment" in names


def test_nothing_to_serve_says_which_stream_to_run(spark, tmp_path) -> None:
    from lakehouse.serving.serve import NoServingDataError

    with pytest.raises(NoServingDataError, match=r"python -m jobs\.enrich"):
        serve(spark, local_lakehouse(tmp_path), "revenue_by_segment", mode="lambda")
