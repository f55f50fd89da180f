"""Loading a side from Delta tables on local disk: the batch's final ranges and the late
events it had not read yet; the stream's final mark from its watermark."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pyspark.sql import functions as F

from lakehouse.core.config import Settings
from lakehouse.core.frames import rows_frame
from lakehouse.core.tables import Table, table
from lakehouse.core.times import EPOCH
from lakehouse.reconcile.sources import (
    UnknownSourceError,
    batch_source,
    bound_to_common_log,
    load_side,
    load_sides,
    named_source,
    speed_source,
    stream_source,
)
from lakehouse.speed.outputs import SpeedOutputs
from lakehouse.transforms.views import VIEWS
from tests.unit.reconcile.conftest import Events, at

pytestmark = pytest.mark.slow  # make test-fast leaves it out (docs/testing.md)

COUNTS = VIEWS["event_counts_1m"]


def save(df: Any, name: str | Table, settings: Settings) -> None:
    target = table(name) if isinstance(name, str) else name
    df.write.format("delta").mode("append").save(target.path(settings))


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
    return rows_frame(spark, [row], table("ops.batch_runs").spark_schema())


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
    save(progress_row(spark, watermark, {0: 5}, 0), "ops.speed_progress", local_settings)
    side = load_side(spark, local_settings, speed_source(), COUNTS)
    assert side.closed == [(EPOCH, watermark - timedelta(seconds=COUNTS.settle_seconds))]
    assert side.missing is None  # no late events table yet
    sessions = load_side(spark, local_settings, speed_source(), VIEWS["user_sessions"])
    assert sessions.rows is None and sessions.closed == []


def progress_row(spark: Any, watermark: Any, offsets: dict[int, int], silver: int) -> Any:
    micros = int((watermark - EPOCH) / timedelta(microseconds=1))
    return rows_frame(
        spark,
        [(watermark, micros, offsets, silver)],
        "processed_at timestamp, watermark_micros long, offsets map<int,long>, silver_version long",
    )


def in_log(df: Any, *offsets: int) -> Any:
    """The events at these offsets of partition 0, in order."""
    rows = [(r["event_id"], o) for r, o in zip(df.collect(), offsets, strict=True)]
    where = rows_frame(df.sparkSession, rows, "event_id string, kafka_offset long")
    return df.join(where, "event_id").withColumn("kafka_partition", F.lit(0))


def test_streams_at_different_log_ends_miss_what_only_the_other_read(
    spark: Any, events: Events, local_settings: Settings
) -> None:
    # The live stream read offsets 0-1 of partition 0 (its late table already holds an event
    # of a batch after that progress row); replay v1 read 0-3, offset 3 one it set aside.
    one, two, three, four = (events((f"10:0{i}", "click", f"u{i}")) for i in range(1, 5))
    save(in_log(one.unionByName(two), 0, 1), "silver.events", local_settings)
    save(in_log(four, 5), "speed.late_events", local_settings)
    save(progress_row(spark, at("11:00"), {0: 2}, 0), "ops.speed_progress", local_settings)
    replay = SpeedOutputs.replay("v1")
    all_four = one.unionByName(two).unionByName(three).unionByName(four)
    save(in_log(all_four, 0, 1, 2, 3), replay.silver, local_settings)
    save(in_log(four, 3), replay.late, local_settings)
    save(progress_row(spark, at("11:00"), {0: 4}, 0), replay.progress, local_settings)

    def sides(source: Any) -> dict[str, Any]:
        return load_sides(spark, local_settings, source, [COUNTS])

    live, v1 = bound_to_common_log(
        spark, local_settings, sides(speed_source()), sides(stream_source(replay, "replay_v1"))
    )
    missing = live[COUNTS.name].missing
    assert missing is not None and "events replay_v1 read beyond where speed ended" in missing.label
    assert sorted(r["user_id"] for r in missing.events.collect()) == ["u3", "u4"]
    replay_missing = v1[COUNTS.name].missing
    assert replay_missing is not None and replay_missing.label == "late events replay_v1 set aside"
    assert [r["user_id"] for r in replay_missing.events.collect()] == ["u4"]


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


def test_a_stream_compared_with_the_batch_misses_every_event_beyond_its_end(
    spark: Any, events: Events, local_settings: Settings
) -> None:
    # Replay v1 ended after offsets 0-1; the live stream went on to 0-3 and filled bronze, so a
    # later batch rerun may hold u3 and u4 (or, late and unread, count them as its missing).
    one, two, three, four = (events((f"10:0{i}", "click", f"u{i}")) for i in range(1, 5))
    all_four = one.unionByName(two).unionByName(three).unionByName(four)
    save(in_log(all_four, 0, 1, 2, 3), "silver.events", local_settings)
    save(events.view(COUNTS.name, ("10:01", "click", "u1")), COUNTS.batch_table, local_settings)
    save(batch_run(spark, "10:00", "11:00", "11:05", "11:06"), "ops.batch_runs", local_settings)
    replay = SpeedOutputs.replay("v1")
    save(in_log(one.unionByName(two), 0, 1), replay.silver, local_settings)
    save(progress_row(spark, at("11:00"), {0: 2}, 0), replay.progress, local_settings)

    def sides(source: Any) -> dict[str, Any]:
        return load_sides(spark, local_settings, source, [COUNTS])

    for batch_first in (True, False):
        pair = (sides(batch_source()), sides(stream_source(replay, "replay_v1")))
        left, right = bound_to_common_log(spark, local_settings, *pair[:: 1 if batch_first else -1])
        batch, v1 = (left, right) if batch_first else (right, left)
        assert batch[COUNTS.name].missing is None  # no late events: it missed nothing
        missing = v1[COUNTS.name].missing
        assert missing is not None and "beyond where replay_v1 ended" in missing.label
        assert sorted(r["user_id"] for r in missing.events.collect()) == ["u3", "u4"]


def test_a_late_event_is_missing_only_from_the_rows_of_the_run_that_had_not_read_it(
    spark: Any, events: Events, local_settings: Settings
) -> None:
    # 11:00 ran first (read until 12:05); then 10:00 was rerun (read until 12:35). The event
    # of 11:00:30, in bronze at 12:30, falls in both runs' reads (10:00 reads a minute past
    # its hour), but its minute's row is 11:00's, which had not read it.
    for _ in range(3):  # versions 0-2: the runs below wrote versions 1 and 2
        save(events.view(COUNTS.name, ("11:01", "click", "u1")), COUNTS.batch_table, local_settings)
    runs = [("11:00", "12:00", "12:05", "12:06", 1), ("10:00", "11:00", "12:35", "12:40", 2)]
    for start, end, read_until, finished, version in runs:
        run = batch_run(spark, start, end, read_until, finished)
        save(
            run.withColumn("table_version", F.lit(version).cast("long")),
            "ops.batch_runs",
            local_settings,
        )
    save(
        events(("11:00:30", "click", "u9", "/", None, "12:30")), "speed.late_events", local_settings
    )
    side = load_side(spark, local_settings, batch_source(), COUNTS)
    assert side.missing is not None
    assert [r["user_id"] for r in side.missing.events.collect()] == ["u9"]
    [row] = side.missing.rows(COUNTS).collect()
    assert (row["window_start"], row["events"]) == (at("11:00").replace(tzinfo=None), 1)


def test_missing_rows_are_only_those_in_each_events_range(spark: Any, events: Events) -> None:
    from lakehouse.reconcile.compare import ROWS_FROM, ROWS_TO, Missing

    users = VIEWS["active_users_10m"]
    late = events(("11:03", "click", "u9"))
    scoped = late.withColumns({ROWS_FROM: F.lit(at("11:00")), ROWS_TO: F.lit(at("12:00"))})
    missing = Missing(late, "late", scoped)
    # The event is in the windows starting 10:54 to 11:03; only 11:00 on are in the range.
    starts = sorted(r["window_start"].minute for r in missing.rows(users).collect())
    assert starts == [0, 1, 2, 3]
    assert len(Missing(late, "late").rows(users).collect()) == 10
