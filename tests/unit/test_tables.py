"""The table registry's write settings reach Delta."""

from __future__ import annotations

from lakehouse.delta_io import append_once
from lakehouse.speed_batch import SpeedOutputs
from lakehouse.tables import SPEED, TABLES, table


def test_the_stream_tables_checkpoint_at_distinct_prime_intervals() -> None:
    intervals = [t.checkpoint_interval for t in TABLES.values() if t.writer == SPEED]
    assert all(intervals), "every table the stream commits each batch has an interval"
    assert len(set(intervals)) == len(intervals)
    assert all(all(n % d for d in range(2, n)) for n in intervals if n), intervals


def test_a_replay_version_checkpoints_like_the_live_tables() -> None:
    live, replay = SpeedOutputs.live(), SpeedOutputs.replay("v2")
    assert replay.sessions.checkpoint_interval == live.sessions.checkpoint_interval


def test_creating_a_table_sets_its_checkpoint_interval(spark, local_settings) -> None:
    target = table("speed.late_events")
    rows = spark.createDataFrame([(1,)], "n int")
    append_once(rows, target, local_settings, "test", 0)
    [detail] = spark.sql(f"DESCRIBE DETAIL delta.`{target.path(local_settings)}`").collect()
    assert detail["properties"]["delta.checkpointInterval"] == str(target.checkpoint_interval)
