"""Delta writes on tiny local tables."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import pytest

from lakehouse.core.delta_io import (
    append_batch,
    append_once,
    merge_once,
    read_before_batch,
    read_table,
    read_table_at,
    small_frame,
    stored_layout,
    table_version,
)
from lakehouse.core.delta_maintenance import (
    compact_small_files,
)
from lakehouse.core.frames import rows_frame
from lakehouse.core.tables import table
from tests.delta_files import (
    files_in_use,
    files_on_disk,
)

pytestmark = pytest.mark.slow  # make test-fast leaves it out (docs/testing.md)

BOUND = 50_000  # bytes: a compaction's small-file bound

ID = "id bigint"  # the tables of the tests that only count files and rows
HOURLY = replace(
    table("speed.event_counts_1m"),
    name="tests.hourly",
    schema="window_start timestamp, events bigint",
    checkpoint_interval=None,
    partials_of=None,
)


def window_rows(spark, *rows: tuple[str, int]):
    return rows_frame(
        spark,
        [(datetime.fromisoformat(t), n) for t, n in rows],
        "window_start timestamp, events long",
    )


def test_writers_add_the_layout_column_and_readers_never_see_it(spark, local_settings) -> None:
    append_once(window_rows(spark, ("2026-03-01T10:59:00", 1)), HOURLY, local_settings, "t", 0)
    merge_once(
        window_rows(spark, ("2026-03-01T10:59:00", 2), ("2026-03-01T11:00:00", 5)),
        HOURLY,
        local_settings,
        "t",
        1,
        lambda m: m.whenMatchedUpdate(
            set={"events": "t.events + s.events"}
        ).whenNotMatchedInsertAll(),
        on="t.window_start = s.window_start",
    )
    path = HOURLY.path(local_settings)
    [detail] = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()
    assert detail["partitionColumns"] == ["window_hour"]
    stored = spark.read.format("delta").load(path).orderBy("window_start").collect()
    assert [r["window_hour"] for r in stored] == ["2026-03-01T10", "2026-03-01T11"]
    read = read_table(spark, HOURLY, local_settings)
    assert read.columns == ["window_start", "events"]
    assert [r["events"] for r in read.orderBy("window_start").collect()] == [3, 5]
    assert read_table_at(spark, HOURLY, local_settings, 0).columns == ["window_start", "events"]


def test_a_retried_batch_reads_a_marked_merge_s_table_as_its_first_try_did(
    spark, local_settings
) -> None:
    def add(rows, batch: int) -> None:
        merge_once(
            window_rows(spark, *rows),
            HOURLY,
            local_settings,
            "w",
            batch,
            lambda m: m.whenMatchedUpdate(
                set={"events": "t.events + s.events"}
            ).whenNotMatchedInsertAll(),
            on="t.window_start = s.window_start",
            mark=True,
        )

    def before(batch: int, untried: bool = False) -> list[int]:
        read = read_before_batch(spark, HOURLY, local_settings, "w", batch, untried)
        return sorted(r["events"] for r in read.collect())

    assert before(0) == [], "no table yet: no rows"
    add([("2026-03-01T10:59:00", 1)], 0)
    assert before(0) == [], "batch 0 created it: a retry of it reads no rows"
    add([("2026-03-01T10:59:00", 2), ("2026-03-01T11:00:00", 5)], 1)
    add([("2026-03-01T11:00:00", 5)], 1)  # the retry itself: Delta's transaction id skips it
    assert before(1) == [1], "the table as batch 0 left it"
    assert before(2) == [3, 5], "batch 2 has not written: the latest version"
    assert before(1, untried=True) == [3, 5], "untried: read without looking"


def test_a_table_created_before_its_layout_keeps_taking_appends(spark, local_settings) -> None:
    """A lakehouse written by an earlier release has unpartitioned views: the stream must go on
    writing them as they are, not fail on a column they do not have."""
    assert stored_layout(spark, HOURLY, local_settings) == ("window_hour",), "not created yet"
    unlaid = replace(HOURLY, layout_columns=())
    append_once(window_rows(spark, ("2026-03-01T10:59:00", 1)), unlaid, local_settings, "t", 0)
    layout = stored_layout(spark, HOURLY, local_settings)
    assert layout == ()
    rows = window_rows(spark, ("2026-03-01T10:59:00", 2))
    append_once(rows, HOURLY, local_settings, "t", 1, layout)
    stored = spark.read.format("delta").load(HOURLY.path(local_settings))
    assert stored.columns == ["window_start", "events"]
    assert sorted(r["events"] for r in stored.collect()) == [1, 2]


def test_a_few_rows_from_the_driver_are_written_without_stray_files(spark, local_settings) -> None:
    """Written from several slices, one row leaves an empty file per empty slice that no
    commit adds; the progress table gained one every micro-batch."""
    target = replace(
        table("ops.speed_progress"), name="tests.small_appends", schema="n long, note string"
    )
    for version in range(3):
        rows = [(version, f"row {version}")]
        append_once(small_frame(spark, rows, target), target, local_settings, "t", version)
    path = target.path(local_settings)
    assert files_on_disk(path) == files_in_use(spark, path)
    assert read_table(spark, target, local_settings).count() == 3


def test_a_table_s_version_is_its_log_s_latest_whoever_committed_it(spark, local_settings) -> None:
    """None before the first commit; then the latest version, a commit delta-rs made since
    included, as delta-rs reads it from the same log on its own."""
    import pyarrow as pa

    from lakehouse.core import small_tables

    target = replace(
        table("ops.speed_progress"), name="tests.versions", schema="n long, note string"
    )
    assert table_version(spark, target, local_settings) is None
    for version in range(2):
        append_once(
            small_frame(spark, [(version, "spark")], target), target, local_settings, "t", version
        )
        assert table_version(spark, target, local_settings) == version
    arrow = pa.table({"n": pa.array([2], pa.int64()), "note": ["delta-rs"]})
    assert small_tables.append_marked(local_settings, target, lambda _: arrow, "rs", 0)
    assert table_version(spark, target, local_settings) == 2
    assert small_tables.table_version(local_settings, target) == 2


def test_an_append_is_made_once_per_writer_and_batch_whichever_way_it_was_made(
    spark, local_settings
) -> None:
    """A batch a stream knows to be untried appends without looking; any other append of the
    same (writer, batch) finds that commit by its mark, past commits of other kinds and of
    other writers, and one committed with a transaction id alone (before marks) by Delta's
    own check. A version older than the writer's last counts as written, as Delta's does."""
    target = replace(
        table("ops.speed_progress"), name="tests.marked_appends", schema="n long, note string"
    )

    def append(n: int, app: str, version: int, untried: bool = False) -> None:
        rows = small_frame(spark, [(n, f"{app}:{version}")], target)
        append_batch(rows, target, local_settings, app, version, untried=untried)

    def notes() -> list[str]:
        return sorted(r["note"] for r in read_table(spark, target, local_settings).collect())

    append(1, "a", 0, untried=True)
    append(1, "a", 0)  # a retry of batch 0: its mark is found
    append(2, "b", 0)  # another writer's batch 0
    append(3, "a", 1)
    # A commit of another kind after batch 1 (a compaction, as a stream's turn makes)...
    compact_small_files(spark, target, local_settings, small_file_bytes=BOUND)
    append(3, "a", 1)  # ...does not hide its mark
    append(0, "a", 0)  # older than the writer's last: written
    # Written by a stream before marks: Delta's transaction id alone.
    small_frame(spark, [(9, "a:5")], target).write.format("delta").mode("append").option(
        "txnAppId", "a"
    ).option("txnVersion", 5).save(target.path(local_settings))
    append(9, "a", 5)
    append(6, "a", 6)

    assert notes() == ["a:0", "a:1", "a:5", "a:6", "b:0"]
