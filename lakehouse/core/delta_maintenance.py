"""A Delta table's upkeep, by its one writer: small files compacted, a view's partial rows
folded into their combination, and the files no version within the retention reads vacuumed
(with the retention that keeps an older version readable when one is still served)."""

from __future__ import annotations

import math
from collections import Counter
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from lakehouse.core.config import Settings
from lakehouse.core.delta_io import as_read, conformed, overwrite_where, table_version, with_layout
from lakehouse.core.tables import Table
from lakehouse.core.times import from_micros

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from lakehouse.core.small_tables import Partition


# OPTIMIZE leaves files of at least this size alone (Delta's setting; its default is 1 GB).
OPTIMIZE_MIN_FILE_SIZE = "spark.databricks.delta.optimize.minFileSize"


def compact_small_files(
    spark: SparkSession, table: Table, settings: Settings, small_file_bytes: int
) -> None:
    """Rewrite the table's files smaller than `small_file_bytes` into larger ones (OPTIMIZE).

    Files at or above the bound are never read again, so one compaction rewrites at most about
    that much plus what was added since the last one, however old the table is. Readers are
    not disturbed (a new version with the same rows); only the table's writer may call this.

    delta-rs commits it (small_tables.compact): Spark's OPTIMIZE plans for seconds even over a
    few small files, and a stream's batch waits for its compaction turn. Spark's is the way
    for a table delta-rs cannot write.
    """
    from delta.tables import DeltaTable

    from lakehouse.core.small_tables import compact

    if compact(settings, table, small_file_bytes):
        return
    # A session of its own: the setting must not reach other writes, and neither may a MERGE's
    # transaction id reach this commit.
    session = spark.newSession()
    session.conf.set(OPTIMIZE_MIN_FILE_SIZE, str(small_file_bytes))
    DeltaTable.forPath(session, table.path(settings)).optimize().executeCompaction()


def fold_partials(spark: SparkSession, table: Table, settings: Settings) -> None:
    """Replace the partial rows (Table.partials_of) of every partition that holds more than one
    file by their combination, a file per partition, in one commit. Combining is idempotent,
    so every reader reads the same rows before and after; a partition of one file is left
    alone (folded already, or written once). Only the table's writer may call this."""
    from pyspark.sql import functions as F

    from lakehouse.core.small_tables import replace_where
    from lakehouse.core.spark import release_local_checkpoint

    crowded, stored = partitions_to_fold(spark, table, settings)
    if stored is None:
        return
    condition = _partitions_predicate(crowded)
    combined = as_read(stored, table)

    def arrow(partitioned: tuple[str, ...]) -> pa.Table:
        return with_layout(conformed(combined, table), table).toArrow()

    # A fold's rows are a few per key and hour: collected, they are committed by delta-rs,
    # as the stream's partial rows are (Spark plans and commits a write for about a second).
    if replace_where(settings, table, arrow, condition):
        return
    # Checkpointed: the rows are read from the files the commit replaces.
    rows = combined.repartition(
        *(F.expr(expression) for _, expression in table.layout_columns)
    ).localCheckpoint()
    try:
        overwrite_where(rows, table, settings, table.writer, condition)
    finally:
        release_local_checkpoint(rows)


def partitions_to_fold(
    spark: SparkSession, table: Table, settings: Settings
) -> tuple[list[Partition], DataFrame | None]:
    """The table's partitions of more than one file, and their stored rows (None when there
    is no such partition). Found from the log by delta-rs, the rows handed to Spark as Arrow:
    Spark would load the table's snapshot and list its files first, most of a small view's
    fold. Through Spark when delta-rs cannot say (a partition column not text, or rows
    whose columns are not the declared ones)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from lakehouse.core.small_tables import crowded_partitions

    found = crowded_partitions(settings, table)
    if found is not None:
        crowded, rows = found
        if not crowded:
            return [], None
        declared = table.spark_schema()
        if sorted(rows.column_names) == sorted(declared.fieldNames()):
            rows = rows.select(declared.fieldNames()).cast(to_arrow_schema(declared))
            return crowded, spark.createDataFrame(rows, declared)
    stored = spark.read.format("delta").load(table.path(settings))
    files = Counter(_partition_of(path, table.partition_columns) for path in stored.inputFiles())
    crowded = sorted(partition for partition, count in files.items() if count > 1)
    return crowded, stored.where(_partitions_predicate(crowded)) if crowded else None


def _partitions_predicate(partitions: list[Partition]) -> str:
    """SQL that holds for the rows of any of `partitions` ((column, value) pairs)."""
    return " OR ".join(
        "(" + " AND ".join(f"{column} = '{value}'" for column, value in partition) + ")"
        for partition in partitions
    )


def _partition_of(path: str, columns: tuple[str, ...]) -> Partition:
    """(column, value) of a data file's partition, from its path (.../window_hour=.../x.parquet)."""
    from urllib.parse import unquote

    found = dict(part.split("=", 1) for part in path.split("/")[:-1] if "=" in part)
    return tuple((column, unquote(found[column])) for column in columns)


# The configured retention (`vacuum_after_hours`) is the decision, so the vacuum's session
# turns off two Delta defaults that would overrule it: a refusal of anything under 7 days, and
# (Delta 4) ignoring RETAIN unless it is 0, for the table's deletedFileRetentionDuration.
RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
RETENTION_IGNORED = "spark.databricks.delta.vacuum.retentionWindowIgnore.enabled"
# Tasks the folder listing is split into: a task per core. Spark's default of 10,000 makes a
# vacuum of a small table mostly task overhead.
LISTING_TASKS = "spark.sql.sources.parallelPartitionDiscovery.parallelism"


def vacuum_replaced_files(
    spark: SparkSession, table: Table, settings: Settings, after_hours: int
) -> None:
    """Delete the table's files that no version newer than `after_hours` ago reads: those a
    MERGE, a compaction or a rerun replaced, and those no commit ever added (a write killed
    before its commit; Delta 4.4 also leaves an empty file for each slice of a write that held
    no rows). Versions older than that can no longer be read (time travel).

    FULL, that is by listing the table's folder: LITE finds only the files the log says were
    replaced, and would leave the others on disk for ever.
    """
    session = spark.newSession()
    session.conf.set(RETENTION_CHECK, "false")
    session.conf.set(RETENTION_IGNORED, "false")
    session.conf.set(LISTING_TASKS, str(spark.sparkContext.defaultParallelism))
    session.sql(f"VACUUM delta.`{table.path(settings)}` RETAIN {after_hours} HOURS FULL").collect()


def retention_keeping(
    spark: SparkSession, table: Table, settings: Settings, after_hours: int, version: int | None
) -> int:
    """The vacuum retention (hours) that still lets `version` of the table be read: at least
    `after_hours`, and back to that version's commit. A file the version reads was replaced by a
    later commit, and a vacuum deletes it only once that commit is older than the retention."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    if version is None:
        return after_hours
    latest = table_version(spark, table, settings)
    if latest is None or version >= latest:
        return after_hours  # nothing the version reads has been replaced
    found = (
        DeltaTable.forPath(spark, table.path(settings))
        .history(latest - version + 1)
        .where(F.col("version") == version)
        .select(F.unix_micros("timestamp"))
        .collect()
    )
    if not found:  # its commit has left the log (delta.logRetentionDuration): unreadable anyway
        return after_hours
    [[micros]] = found
    age_hours = (datetime.now(UTC) - from_micros(micros)).total_seconds() / 3600
    # An hour on top: the commit's timestamp and this clock are read at different moments.
    return max(after_hours, math.ceil(age_hours) + 1)


def last_vacuum_end(
    spark: SparkSession, table: Table, settings: Settings, within_commits: int
) -> datetime | None:
    """When a vacuum of the table last finished, if one did within its last `within_commits`
    commits (reading the whole history would cost as much as the table has versions)."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    [[micros]] = (
        DeltaTable.forPath(spark, table.path(settings))
        .history(within_commits)
        .where(F.col("operation") == "VACUUM END")
        .agg(F.max(F.unix_micros("timestamp")))
        .collect()
    )
    return None if micros is None else from_micros(micros)
