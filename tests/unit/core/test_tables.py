"""The table registry: every table declares its schema once, writes are held to it, and its
write settings reach Delta."""

from __future__ import annotations

import json

import pytest

from lakehouse.cdc.shop import CAPTURED
from lakehouse.core.delta_io import SchemaMismatchError, append_once
from lakehouse.core.tables import CDC, COMMERCE, ENRICH, JOINS, SPEED, TABLES, Table, table
from lakehouse.speed.outputs import SpeedOutputs


def one_row(spark, target: Table, **sql_values: str):
    """A row with `target`'s declared columns: the values given (SQL literals), nulls else."""
    columns = [
        f"CAST({sql_values.get(f.name, 'NULL')} AS {f.dataType.simpleString()}) AS `{f.name}`"
        for f in target.spark_schema().fields
    ]
    return spark.sql("SELECT " + ", ".join(columns))


def test_every_table_declares_a_schema_that_parses_and_has_its_own_columns(spark) -> None:
    for t in TABLES.values():
        names = [f.name for f in t.spark_schema().fields]
        assert names and len(set(names)) == len(names), t.name
        assert not set(t.layout_names) & set(names), f"{t.name}: layout columns are not declared"
        assert set(t.partition_by) <= set(names), t.name


def test_a_write_is_conformed_to_the_declared_order_and_refused_if_it_differs(
    spark, local_settings
) -> None:
    target = table("ops.batch_runs")
    row = one_row(spark, target, run_id="'r1'", rows="7")
    append_once(row.select(*reversed(row.columns)), target, local_settings, "test", 0)
    written = spark.read.format("delta").load(target.path(local_settings))
    assert written.columns == [f.name for f in target.spark_schema().fields]
    with pytest.raises(SchemaMismatchError, match=r"missing rows bigint; not declared rows string"):
        append_once(
            row.withColumn("rows", row["rows"].cast("string")), target, local_settings, "t", 1
        )
    with pytest.raises(SchemaMismatchError, match=r"missing nothing; not declared extra int"):
        append_once(row.selectExpr("*", "1 AS extra"), target, local_settings, "t", 2)


@pytest.mark.parametrize("stream", [SPEED, CDC, ENRICH, COMMERCE, JOINS])
def test_the_stream_tables_checkpoint_at_distinct_prime_intervals(stream: str) -> None:
    intervals = [t.checkpoint_interval for t in TABLES.values() if t.writer == stream]
    assert all(intervals), "every table the stream commits each batch has an interval"
    assert len(set(intervals)) == len(intervals)
    assert all(all(n % d for d in range(2, n)) for n in intervals if n), intervals


def test_each_captured_table_has_changes_current_and_history_the_cdc_job_writes() -> None:
    names = {"bronze.cdc_quarantine"}
    for name, captured in CAPTURED.items():
        current, history = table(f"silver.{name}_current"), table(f"silver.{name}_history")
        names |= {f"bronze.{name}_changes", current.name, history.name}
        for typed in (current, history):
            columns = [(f.name, f.dataType.simpleString()) for f in typed.spark_schema()]
            assert columns[: len(captured.columns)] == list(captured.columns), typed.name
    assert names <= {t.name for t in TABLES.values() if t.writer == CDC}
    assert table("bronze.cdc_quarantine").schema == table("bronze.quarantine").schema


def test_a_replay_version_checkpoints_like_the_live_tables() -> None:
    live, replay = SpeedOutputs.live(), SpeedOutputs.replay("v2")
    assert replay.sessions.checkpoint_interval == live.sessions.checkpoint_interval
    assert replay.silver.stats_columns == live.silver.stats_columns


def test_creating_a_table_sets_its_checkpoint_interval(spark, local_settings) -> None:
    target = table("speed.late_events")
    append_once(one_row(spark, target), target, local_settings, "test", 0)
    [detail] = spark.sql(f"DESCRIBE DETAIL delta.`{target.path(local_settings)}`").collect()
    assert detail["properties"]["delta.checkpointInterval"] == str(target.checkpoint_interval)


def test_silver_keeps_statistics_only_for_what_it_is_looked_up_by(spark, local_settings) -> None:
    target = table("silver.events")
    rows = one_row(
        spark,
        target,
        event_id="'e-1'",
        event_time="timestamp'2026-03-01 12:00:00'",
        kafka_timestamp="timestamp'2026-03-01 12:00:01'",
        ingested_at="timestamp'2026-03-01 12:00:02'",
        event_date="date'2026-03-01'",
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
