"""lakehouse.core.small_tables.has_rows: whether a table holds a row, read by delta-rs from the
files' statistics, as a job's Spark-free check before it starts a JVM."""

from __future__ import annotations

from lakehouse.core.delta_io import append_new, small_frame
from lakehouse.core.small_tables import has_rows
from lakehouse.core.tables import table

PROGRESS = table("ops.cdc_progress")


def test_a_table_has_rows_only_once_a_row_is_written(spark, local_settings) -> None:
    assert not has_rows(local_settings, PROGRESS)  # no table yet
    append_new(small_frame(spark, [], PROGRESS), PROGRESS, local_settings)
    assert not has_rows(local_settings, PROGRESS)  # a table, but no row
    nulls = tuple(None for _ in PROGRESS.spark_schema().fields)
    append_new(small_frame(spark, [nulls], PROGRESS), PROGRESS, local_settings)
    assert has_rows(local_settings, PROGRESS)
