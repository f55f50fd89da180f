"""Loading a side from Delta tables on local disk: the batch's final ranges and the late
events it had not read yet; the stream's final mark from its watermark."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from lakehouse.batch import RUNS_SCHEMA
from lakehouse.config import Settings
from lakehouse.reconcile.sources import (
    UnknownSourceError,
    batch_source,
    load_side,
    named_source,
    speed_source,
)
from lakehouse.tables import table
from lakehouse.times import EPOCH
from lakehouse.views import VIEWS
from tests.unit.reconcile.conftest import Events, at

COUNTS = VIEWS["event_counts_1m"]


def save(df: Any, name: str, settings: Settings) -> None:
    df.write.format("delta").mode("append").save(table(name).path(settings))


def batch_run(spark: Any, start: str, end: str, read_until: str, finished: str) -> Any:
    row = {
        "run_id": f"run-{start}",
        "view": COUNTS.name,
        "interval_start": at(start),
        "interval_end": at(end),
        "final_until": at(end),
        "rows": 1,
        "table_version": 0,
        "bronze_version": 0,
        "ingest_high_water": at(read_until),
        "watermark": at(read_until),
        "events": 1,
        "started_at": at(finished),
        "finished_at": at(finished),
        "duration_seconds": 1.0,
    }
    return spark.createDataFrame([row], RUNS_SCHEMA)


def test_the_batch_misses_late_events_that_arrived_after_its_run_read_bronze(
    spark: Any, events: Events, local_settings: Settings
) -> None:
    save(events.view(COUNTS.name, ("10:01", "click", "u1")), COUNTS.batch_table, local_settings)
    save(batch_run(spark, "10:00", "11:00", "11:05", "11:06"), "ops.batch_runs", local_settings)
    late = events(
        ("10:30", "click", "u1", "/", None, "11:00"),  # in bronze when the batch read it
        ("10:40", "click", "u2", "/", None, "11:30"),  # arrived after: not in the batch
    )
    save(late, "speed.late_events", local_settings)
    side = load_side(spark, local_settings, batch_source(), COUNTS)
    assert side.closed == [(at("10:00"), at("11:00"))]
    assert side.missing is not None
    assert [r["user_id"] for r in side.missing.events.collect()] == ["u2"]


def test_a_rerun_that_read_everything_misses_nothing(
    spark: Any, events: Events, local_settings: Settings
) -> None:
    save(events.view(COUNTS.name, ("10:01", "click", "u1")), COUNTS.batch_table, local_settings)
    save(batch_run(spark, "10:00", "11:00", "11:05", "11:06"), "ops.batch_runs", local_settings)
    save(batch_run(spark, "10:00", "11:00", "12:00", "12:01"), "ops.batch_runs", local_settings)
    late = events(("10:40", "click", "u2", "/", None, "11:30"))
    save(late, "speed.late_events", local_settings)
    side = load_side(spark, local_settings, batch_source(), COUNTS)
    # The last run that wrote the window read the event: nothing is missing.
    assert side.missing is None or side.missing.events.count() == 0


def test_the_stream_is_final_up_to_its_watermark_minus_the_settle_time(
    spark: Any, events: Events, local_settings: Settings
) -> None:
    save(events.view(COUNTS.name, ("10:01", "click", "u1")), COUNTS.speed_table, local_settings)
    watermark = at("11:00")
    progress = spark.createDataFrame(
        [(at("11:01"), int((watermark - EPOCH) / timedelta(microseconds=1)))],
        "processed_at timestamp, watermark_micros long",
    )
    save(progress, "ops.speed_progress", local_settings)
    side = load_side(spark, local_settings, speed_source(), COUNTS)
    assert side.closed == [(EPOCH, watermark - timedelta(seconds=COUNTS.settle_seconds))]
    assert side.missing is None  # no late events table yet
    sessions = load_side(spark, local_settings, speed_source(), VIEWS["user_sessions"])
    assert sessions.rows is None and sessions.closed == []


def test_sources_by_name() -> None:
    assert named_source("batch").kind == "batch"
    assert named_source("speed").tables[COUNTS.name].name == "speed.event_counts_1m"
    replay = named_source("replay:v3")
    assert replay.name == "replay_v3" and replay.kind == "stream"
    assert replay.tables[COUNTS.name].name == "replay_v3.event_counts_1m"
    for bad in ("replay:V3", "replay:live", "kafka"):
        try:
            named_source(bad)
        except UnknownSourceError:
            continue
        raise AssertionError(f"{bad!r} was accepted")
