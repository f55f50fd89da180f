"""lakehouse.core.small_tables: whether a table holds a row, read by delta-rs from the files'
statistics, as a job's Spark-free check before it starts a JVM; a stream's few-row appends
committed by delta-rs (through delta_io's append_small_batch and append_rows_batch)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from lakehouse.core.delta_io import (
    append_new,
    append_rows_batch,
    append_small_batch,
    marked_by,
    read_table,
    small_frame,
)
from lakehouse.core.frames import rows_frame
from lakehouse.core.small_tables import has_rows
from lakehouse.core.tables import table
from tests.delta_files import by_delta_rs

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

PROGRESS = table("ops.cdc_progress")


def test_a_table_has_rows_only_once_a_row_is_written(spark, local_settings) -> None:
    assert not has_rows(local_settings, PROGRESS)  # no table yet
    append_new(small_frame(spark, [], PROGRESS), PROGRESS, local_settings)
    assert not has_rows(local_settings, PROGRESS)  # a table, but no row
    nulls = tuple(None for _ in PROGRESS.spark_schema().fields)
    append_new(small_frame(spark, [nulls], PROGRESS), PROGRESS, local_settings)
    assert has_rows(local_settings, PROGRESS)


PARTIALS = replace(table("speed.revenue_by_segment"), name="tests.small_partials")
APP = "tests:query"


def partial_rows(spark, batch_id: int, hour: int) -> DataFrame:
    at = datetime(2026, 3, 1, hour, 10, tzinfo=UTC)
    rows = [(at, at + timedelta(minutes=1), "gold", "books", 2, Decimal("12.50"), batch_id)]
    return rows_frame(spark, rows, PARTIALS.spark_schema())


def test_an_untried_batch_s_few_rows_are_committed_by_delta_rs_as_spark_would(
    spark, local_settings
) -> None:
    """The first append creates the table through Spark; the next untried batch's rows are
    committed by delta-rs into the same partitions (the layout column), read back by Spark as
    written, and carry the batch mark, so a retry of that batch writes nothing."""
    path = PARTIALS.path(local_settings)
    append_small_batch(partial_rows(spark, 0, 9), PARTIALS, local_settings, APP, 0, True)
    append_small_batch(partial_rows(spark, 1, 10), PARTIALS, local_settings, APP, 1, True)
    assert by_delta_rs(spark, path) == [False, True]
    append_small_batch(partial_rows(spark, 1, 10), PARTIALS, local_settings, APP, 1, False)

    stored = spark.read.format("delta").load(path).orderBy("batch_id").collect()
    assert [(r["batch_id"], r["window_hour"]) for r in stored] == [
        (0, "2026-03-01T09"),
        (1, "2026-03-01T10"),
    ]
    expected = partial_rows(spark, 0, 9).unionByName(partial_rows(spark, 1, 10)).collect()
    assert read_table(spark, PARTIALS, local_settings).orderBy("batch_id").collect() == expected
    assert marked_by(spark, PARTIALS, local_settings, APP, 1)


def test_an_append_goes_through_delta_rs_only_when_small_enough(spark, local_settings) -> None:
    """delta_rs_append_rows and delta_rs_append_mb bound what the driver collects: a batch
    with more rows or bytes goes through Spark's distributed write, as does a batch that may
    have been tried."""
    target = replace(PARTIALS, name="tests.counted_partials")
    bounds = {"delta_rs_append_rows": 1, "delta_rs_append_mb": 1}
    settings = local_settings.model_copy(
        update={"speed": local_settings.speed.model_copy(update=bounds)}
    )

    def append(batch_id: int, rows: int, untried: bool = True, size: int = 100) -> None:
        frame = partial_rows(spark, batch_id, 9)
        append_small_batch(
            frame, target, settings, APP, batch_id, untried, rows=rows, size_bytes=size
        )

    append(0, 1)  # creates the table: Spark
    append(1, 1)
    append(2, 2)  # more rows than the bound
    append(3, 1, untried=False)  # looks for its mark first
    append(4, 1, size=(1 << 20) + 1)  # more bytes than the bound
    append(5, 1, size=1 << 20)
    assert by_delta_rs(spark, target.path(settings)) == [False, True, False, False, False, True]
    assert read_table(spark, target, settings).count() == 6


def test_a_progress_row_from_the_driver_keeps_its_map_and_time_through_delta_rs(
    spark, local_settings
) -> None:
    target = replace(table("ops.enrichment_progress"), name="tests.small_progress")
    at = datetime(2026, 3, 1, 10, 0, 1, 250000, tzinfo=UTC)

    def row(batch_id: int) -> dict[str, Any]:
        return {
            "app_id": APP,
            "batch_id": batch_id,
            "events": 10 + batch_id,
            "corrected": 0,
            "versions": {"users": 3, "silver": 7 + batch_id},
            "processed_at": at,
            "duration_seconds": 0.5,
        }

    for batch_id in range(3):
        append_rows_batch(spark, [row(batch_id)], target, local_settings, APP, batch_id, True)
    append_rows_batch(spark, [row(2)], target, local_settings, APP, 2)  # a retry: written

    assert by_delta_rs(spark, target.path(local_settings)) == [False, True, True]
    stored = read_table(spark, target, local_settings).orderBy("batch_id").collect()
    # PySpark gives a timestamp as a naive datetime in this process's local time.
    local = at.astimezone().replace(tzinfo=None)
    assert [r.asDict() for r in stored] == [row(n) | {"processed_at": local} for n in range(3)]


def test_a_table_at_a_version_read_by_delta_rs_holds_what_spark_reads_there(
    spark, local_settings
) -> None:
    """table_arrow: the rows of each version, in the declared columns and types (times,
    flags, nulls), equal to Spark's read of that version; None for a version or a table that
    does not exist."""
    from lakehouse.cdc.changelog import history_table
    from lakehouse.cdc.shop import USERS
    from lakehouse.core.delta_io import read_table_at
    from lakehouse.core.small_tables import table_arrow

    history = history_table(USERS)
    assert table_arrow(local_settings, history, 0) is None  # no table yet
    then = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
    first = [("u1", "new", "DE", then, then, None, True, False, 1, None)]
    moved = then + timedelta(hours=2)
    second = [
        ("u1", "gold", "DE", moved, moved, None, True, False, 2, None),
        ("u2", None, "FR", then, then, moved, False, True, 3, 4),
    ]
    path = history.path(local_settings)
    rows_frame(spark, first, history.spark_schema()).write.format("delta").save(path)
    rows_frame(spark, second, history.spark_schema()).write.format("delta").mode("append").save(
        path
    )
    for version in (0, 1):
        found = table_arrow(local_settings, history, version)
        assert found is not None
        read = spark.createDataFrame(found, history.spark_schema())
        expected = read_table_at(spark, history, local_settings, version)
        assert expected is not None
        assert sorted(read.collect()) == sorted(expected.collect())
    assert table_arrow(local_settings, history, 2) is None


def test_the_rows_a_filter_keeps_are_read_by_delta_rs_only_while_their_files_are_few(
    spark, local_settings
) -> None:
    """rows_within: the rows Spark's read with the same filter gives, when the files that may
    hold them (the partitions and statistics the filter does not rule out) hold at most the
    bound; None above it, and while the table does not exist."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    from lakehouse.core.small_tables import rows_within

    assert rows_within(local_settings, PARTIALS, None, 100) is None  # no table yet
    for batch_id, hour in ((0, 9), (1, 10), (2, 10)):
        append_small_batch(
            partial_rows(spark, batch_id, hour), PARTIALS, local_settings, APP, batch_id, True
        )
    since = datetime(2026, 3, 1, 10, tzinfo=UTC)
    where = ds.field("window_start") >= pa.scalar(since, pa.timestamp("us", "UTC"))
    found = rows_within(local_settings, PARTIALS, where, 2)  # hour 9's file is skipped
    assert found is not None
    read = spark.createDataFrame(found, PARTIALS.spark_schema())
    expected = read_table(spark, PARTIALS, local_settings).where(f"window_start >= '{since}'")
    assert sorted(read.collect()) == sorted(expected.collect())
    assert sorted(r["batch_id"] for r in read.collect()) == [1, 2]
    assert rows_within(local_settings, PARTIALS, where, 1) is None  # two files' rows: too many
    assert rows_within(local_settings, PARTIALS, None, 2) is None  # all three files
