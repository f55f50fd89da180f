"""A Delta table's upkeep on tiny local tables: compaction, vacuums, folds."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from lakehouse.core.delta_io import (
    append_once,
    overwrite_where,
    read_table,
    read_table_at,
)
from lakehouse.core.delta_maintenance import (
    compact_small_files,
    retention_keeping,
    vacuum_replaced_files,
)
from lakehouse.core.tables import table
from tests.delta_files import (
    FOLDED,
    age_commits,
    files_in_use,
    replaced_files,
    unmarked_commits,
    write_partial_counts,
)
from tests.lakehouses import copied, local_lakehouse

pytestmark = pytest.mark.slow  # make test-fast leaves it out (docs/testing.md)

BOUND = 50_000  # bytes: the compaction's small-file bound


def test_compaction_rewrites_the_small_files_and_leaves_the_large_ones_alone(
    spark, local_settings
) -> None:
    from pyspark.sql import functions as F

    target = replace(
        table("speed.late_events"), name="tests.compacted", schema="id bigint, pad string"
    )
    # One file above the bound (2,000 hashes), then two small ones.
    append_once(
        spark.range(2_000)
        .select("id", F.sha2(F.col("id").cast("string"), 256).alias("pad"))
        .coalesce(1),
        target,
        local_settings,
        "t",
        0,
    )
    path = target.path(local_settings)
    [large] = spark.read.format("delta").load(path).inputFiles()
    assert Path(large.removeprefix("file:")).stat().st_size > BOUND
    for version in range(1, 3):
        append_once(
            spark.range(version * 10_000, version * 10_000 + 3).select(
                "id", F.lit("x").alias("pad")
            ),
            target,
            local_settings,
            "t",
            version,
        )
    before = spark.read.format("delta").load(path).orderBy("id").collect()

    compact_small_files(spark, target, local_settings, small_file_bytes=BOUND)

    files = spark.read.format("delta").load(path).inputFiles()
    assert large in files
    assert len(files) == 2
    assert spark.read.format("delta").load(path).orderBy("id").collect() == before
    assert unmarked_commits(spark, path)[-1] == ("OPTIMIZE", "delta-rs"), "committed by delta-rs"


def test_a_table_delta_rs_cannot_rewrite_is_compacted_by_spark(spark, local_settings) -> None:
    """Column mapping: delta-rs refuses to rewrite such a table's files; Spark's OPTIMIZE
    does, with the same rows."""
    target = replace(table("speed.late_events"), name="tests.mapped", schema="id bigint")
    path = target.path(local_settings)
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id bigint) USING delta TBLPROPERTIES "
        "('delta.columnMapping.mode' = 'name')"
    )
    for n in range(3):
        append_once(spark.range(n, n + 1), target, local_settings, "t", n)
    assert len(spark.read.format("delta").load(path).inputFiles()) == 3

    compact_small_files(spark, target, local_settings, small_file_bytes=BOUND)

    assert len(spark.read.format("delta").load(path).inputFiles()) == 1
    assert sorted(r.id for r in spark.read.format("delta").load(path).collect()) == [0, 1, 2]
    assert unmarked_commits(spark, path)[-1] == ("OPTIMIZE", "spark")


ID = "id bigint"  # the tables of the tests that only count files and rows

# Five one-row commits (versions 0-4), then a compaction (version 5) that replaces their files;
# a checkpoint every 3 versions.
COMPACTED_IDS = replace(
    table("speed.late_events"), name="tests.compacted_ids", checkpoint_interval=3, schema=ID
)


@pytest.fixture(scope="module")
def compacted_once(spark, tmp_path_factory) -> str:
    settings = local_lakehouse(tmp_path_factory.mktemp("compacted"))
    for version in range(5):
        append_once(spark.range(version, version + 1), COMPACTED_IDS, settings, "t", version)
    compact_small_files(spark, COMPACTED_IDS, settings, small_file_bytes=1 << 20)
    return COMPACTED_IDS.path(settings)


@pytest.fixture
def compacted(compacted_once: str, local_settings) -> str:
    """A copy of that table in this test's lakehouse, for the test to vacuum."""
    return str(copied(Path(compacted_once), Path(COMPACTED_IDS.path(local_settings))))


def ids(spark, settings, version: int | None = None) -> list[int]:
    if version is None:
        rows = read_table(spark, COMPACTED_IDS, settings)
    else:
        at_version = read_table_at(spark, COMPACTED_IDS, settings, version)
        assert at_version is not None
        rows = at_version
    return sorted(r["id"] for r in rows.collect())


def test_vacuum_deletes_replaced_files_when_the_log_no_longer_holds_their_commits(
    spark, local_settings, compacted
) -> None:
    """VACUUM LITE would look for replaced files in the commits since the last vacuum; once
    Delta has cleaned those commits up, only listing the folder (FULL) finds them."""
    path = Path(compacted)
    # What Delta's log cleanup does to commits older than its retention: gone, the
    # checkpoint at version 3 stands in for them.
    for commit in range(3):
        (path / "_delta_log" / f"{commit:020d}.json").unlink()
    in_use = set(spark.read.format("delta").load(str(path)).inputFiles())

    vacuum_replaced_files(spark, COMPACTED_IDS, local_settings, after_hours=0)

    on_disk = {f"file:{f}" for f in path.glob("*.parquet")}
    assert on_disk == in_use
    assert ids(spark, local_settings) == [0, 1, 2, 3, 4]


def test_vacuum_keeps_what_the_configured_retention_keeps_whatever_the_table_says(
    spark, local_settings, compacted
) -> None:
    """Delta 4 ignores RETAIN (unless 0) in favour of the table's deletedFileRetentionDuration;
    the hours we configure must decide."""
    spark.sql(
        f"ALTER TABLE delta.`{compacted}` SET TBLPROPERTIES "
        "('delta.deletedFileRetentionDuration' = 'interval 0 hours')"
    )
    replaced_by_compaction = replaced_files(spark, compacted)
    assert replaced_by_compaction

    vacuum_replaced_files(spark, COMPACTED_IDS, local_settings, after_hours=5)
    assert replaced_files(spark, compacted) == replaced_by_compaction, "replaced under 5 hours ago"
    vacuum_replaced_files(spark, COMPACTED_IDS, local_settings, after_hours=0)
    assert replaced_files(spark, compacted) == set()


def test_a_vacuum_keeps_an_older_version_readable_when_asked(
    spark, local_settings, compacted
) -> None:
    """Serving reads a promoted replay version at the table versions its gate passed; the
    stream that goes on writing those tables vacuums them and must not delete what they read."""
    target, settings = COMPACTED_IDS, local_settings
    assert retention_keeping(spark, target, settings, 0, None) == 0
    assert retention_keeping(spark, target, settings, 0, 5) == 0, "the latest: none replaced"

    hours = retention_keeping(spark, target, settings, 0, 2)
    assert hours >= 1, "back to the commit of version 2, seconds ago"
    assert retention_keeping(spark, target, settings, 200, 2) == 200
    vacuum_replaced_files(spark, target, settings, after_hours=hours)
    assert ids(spark, settings, 2) == [0, 1, 2]
    assert replaced_files(spark, compacted), "kept: version 2 reads them"


def test_a_version_a_week_old_is_still_read_and_kept(spark, local_settings, compacted) -> None:
    """Serving reads a replay version at its pins and the batch views at the version of their
    last run; the stream reads silver as the previous batch left it. Any of these may be a
    week old when read (a gate failing for days, a batch layer paused, a stream stopped), and
    Delta 4 refuses by default to read a version older than the table's
    deletedFileRetentionDuration (7 days) once a newer commit exists."""
    age_commits(compacted, days=8)

    hours = retention_keeping(spark, COMPACTED_IDS, local_settings, 168, 2)
    assert hours > 8 * 24, "back to version 2's commit, 8 days ago"
    vacuum_replaced_files(spark, COMPACTED_IDS, local_settings, after_hours=hours)
    assert ids(spark, local_settings, 2) == [0, 1, 2]


def test_vacuum_deletes_the_files_no_commit_added_and_says_so_in_the_log(
    spark, local_settings, driver_settings
) -> None:
    """A rerun's replaceWhere leaves a file its commit does not add (Delta 4.4), as does a
    write killed before its commit; only a listing of the folder finds them. A VACUUM prints
    "Deleted N files and directories ..." on the JVM's standard output, which a job's own
    lines share: the factory routes it to the console log instead."""
    from lakehouse.core.spark import get_spark, jvm_console_log

    target = table("batch.event_counts_1m")
    rows = spark.sql(
        "SELECT timestamp'2026-11-25 10:00:00' AS window_start, "
        "timestamp'2026-11-25 10:01:00' AS window_end, 'click' AS event_type, "
        "3L AS events, CAST(1.5 AS DECIMAL(18,2)) AS amount_sum"
    )
    hour = "window_start >= timestamp'2026-11-25 10:00:00' AND window_start < '2026-11-25 11:00'"
    for _ in range(3):
        overwrite_where(rows, target, local_settings, "batch_layer", hour)
    path = target.path(local_settings)
    assert len(replaced_files(spark, path)) >= 2, "the two reruns replaced the file before"
    # A job run in this process before (tests/jobs_in_process.py) routed the JVM's output to
    # its own state folder's log; asking the factory again routes it to this run's.
    get_spark("tests", driver_settings)
    log = jvm_console_log()
    before = log.read_text() if log.exists() else ""

    vacuum_replaced_files(spark, target, local_settings, after_hours=0)

    assert replaced_files(spark, path) == set()
    assert read_table(spark, target, local_settings).count() == 1
    spark.sparkContext._jvm.java.lang.System.out.flush()
    added = log.read_text()[len(before) :]
    assert re.search(r"Deleted [1-9]\d* files and directories in a total of", added), added


def test_a_fold_finds_its_crowded_hours_in_the_log_and_combines_each_into_one_file(
    spark, local_settings
) -> None:
    """Hour 09 written in three micro-batches, hour 10 in one: the fold finds hour 09 crowded
    from the log and reads only its rows (no Spark scan of the table), commits their
    combination through delta-rs as one file, and leaves hour 10's file as it was. Readers
    read the same rows before and after."""
    from lakehouse.core.delta_maintenance import fold_partials, partitions_to_fold
    from lakehouse.core.small_tables import crowded_partitions

    path = FOLDED.path(local_settings)
    write_partial_counts(spark, FOLDED, local_settings, [(9, 1), (9, 2), (10, 5), (9, 4)])
    hour_10 = {f for f in files_in_use(spark, path) if "window_hour=2026-03-01T10" in f}
    before = read_table(spark, FOLDED, local_settings).collect()

    found = crowded_partitions(local_settings, FOLDED)
    assert found is not None
    crowded, rows = found
    assert crowded == [(("window_hour", "2026-03-01T09"),)]
    assert sorted(rows.column("events").to_pylist()) == [1, 2, 4]
    assert "window_hour" not in rows.column_names
    _, stored = partitions_to_fold(spark, FOLDED, local_settings)
    assert stored is not None and stored.inputFiles() == []

    fold_partials(spark, FOLDED, local_settings)
    assert unmarked_commits(spark, path)[-1] == ("WRITE", "delta-rs")
    assert sorted(read_table(spark, FOLDED, local_settings).collect()) == sorted(before)
    assert [r["events"] for r in before if r["window_start"].hour == 9] == [7]
    in_use = files_in_use(spark, path)
    assert len(in_use) == 2 and hour_10 < in_use
    assert crowded_partitions(local_settings, FOLDED)[0] == []  # type: ignore[index]
    fold_partials(spark, FOLDED, local_settings)  # nothing crowded: no commit
    assert unmarked_commits(spark, path)[-1] == ("WRITE", "delta-rs")
    assert len(unmarked_commits(spark, path)) == 1


def test_a_table_partitioned_by_a_column_not_text_is_folded_through_spark(
    spark, local_settings
) -> None:
    """A partition value the log keeps typed (here a date) is not compared as text: Spark
    lists and reads the crowded partitions, and the fold still combines each into one file."""
    from lakehouse.core.delta_maintenance import fold_partials, partitions_to_fold
    from lakehouse.core.small_tables import crowded_partitions

    by_day = replace(
        FOLDED, name="tests.folded_by_day", layout_columns=(("day", "to_date(window_start)"),)
    )
    path = by_day.path(local_settings)
    write_partial_counts(spark, by_day, local_settings, [(9, 1), (10, 2), (11, 4)])
    before = read_table(spark, by_day, local_settings).collect()

    assert crowded_partitions(local_settings, by_day) is None
    _, stored = partitions_to_fold(spark, by_day, local_settings)
    assert stored is not None and stored.inputFiles()
    fold_partials(spark, by_day, local_settings)
    assert sorted(read_table(spark, by_day, local_settings).collect()) == sorted(before)
    assert len(files_in_use(spark, path)) == 1
