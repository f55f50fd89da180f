"""The table registry's write settings reach Delta."""

from __future__ import annotations

import json

from lakehouse.core.delta_io import append_once
from lakehouse.core.tables import SPEED, TABLES, table
from lakehouse.speed.micro_batch import SpeedOutputs


def test_the_stream_tables_checkpoint_at_distinct_prime_intervals() -> None:
    intervals = [t.checkpoint_interval for t in TABLES.values() if t.writer == SPEED]
    assert all(intervals), "every table the stream commits each batch has an interval"
    assert len(set(intervals)) == len(intervals)
    assert all(all(n % d for d in range(2, n)) for n in intervals if n), intervals


def test_a_replay_version_checkpoints_like_the_live_tables() -> None:
    live, replay = SpeedOutputs.live(), SpeedOutputs.replay("v2")
    assert replay.sessions.checkpoint_interval == live.sessions.checkpoint_interval
    assert replay.silver.stats_columns == live.silver.stats_columns


def test_creating_a_table_sets_its_checkpoint_interval(spark, local_settings) -> None:
    target = table("speed.late_events")
    rows = spark.createDataFrame([(1,)], "n int")
    append_once(rows, target, local_settings, "test", 0)
    [detail] = spark.sql(f"DESCRIBE DETAIL delta.`{target.path(local_settings)}`").collect()
    assert detail["properties"]["delta.checkpointInterval"] == str(target.checkpoint_interval)


def test_silver_keeps_statistics_only_for_what_it_is_looked_up_by(spark, local_settings) -> None:
    target = table("silver.events")
    rows = spark.sql(
        "SELECT 'e-1' AS event_id, timestamp'2026-03-01 12:00:00' AS event_time, "
        "timestamp'2026-03-01 12:00:01' AS kafka_timestamp, "
        "timestamp'2026-03-01 12:00:02' AS ingested_at, date'2026-03-01' AS event_date"
    )
    append_once(rows, target, local_settings, "test", 0)
    [add] = (
        spark.read.json(f"{target.path(local_settings)}/_delta_log/00000000000000000000.json")
        .where("add IS NOT NULL")
        .select("add.stats")
        .collect()
    )
    assert set(json.loads(add["stats"])["minValues"]) == set(target.stats_columns or ())
    assert "event_time" in (target.stats_columns or ())
