"""What a Delta table keeps on disk beyond what its current version reads: the files a newer
version replaced, which only a vacuum deletes."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from lakehouse.core.tables import Table, table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakehouse.core.config import Settings


def files_on_disk(table_path: str) -> set[str]:
    return {
        str(f.relative_to(table_path))
        for f in Path(table_path).rglob("*.parquet")
        if "_delta_log" not in f.parts
    }


def files_in_use(spark: SparkSession, table_path: str) -> set[str]:
    from delta.tables import DeltaTable

    detail = DeltaTable.forPath(spark, table_path).toDF().inputFiles()
    return {str(Path(f.removeprefix("file:")).relative_to(table_path)) for f in detail}


def replaced_files(spark: SparkSession, table_path: str) -> set[str]:
    return files_on_disk(table_path) - files_in_use(spark, table_path)


def age_commits(table_path: str, days: float) -> None:
    """Date every commit of a local table `days` back, as if it had been written then: Delta
    dates a commit by its log file's modification time (our tables keep no in-commit
    timestamps)."""
    import os
    import time

    then = time.time() - days * 86_400
    for f in (Path(table_path) / "_delta_log").iterdir():
        if f.is_file():
            os.utime(f, (then, then))


def commits(table_path: str) -> int:
    """Commits of a local Delta table so far: one JSON file in its log per commit."""
    return len(list(Path(table_path, "_delta_log").glob("*.json")))


# Columns that record when something happened, or in which run: they differ between any two
# runs over the same log, what the other columns say may not.
WALL_CLOCK = {
    "ingested_at",
    "quarantined_at",
    "processed_at",
    "duration_seconds",
    "rows_per_second",
    "freshness_seconds",
    "step_seconds",
    "kafka_lag",
    "total_lag",
    "app_id",
}


def by_delta_rs(spark: SparkSession, table_path: str) -> list[bool]:
    """For each commit of the table, oldest first, whether delta-rs made it."""
    history = spark.sql(f"DESCRIBE HISTORY delta.`{table_path}`").orderBy("version").collect()
    return [str(r["engineInfo"]).startswith("delta-rs") for r in history]


def batch_engines(spark: SparkSession, table_path: str) -> dict[int, str]:
    """Per batch id a stream marked a commit with (delta_io.batch_mark), which engine made
    that commit: "delta-rs" or "spark"."""
    import json

    from lakehouse.core.delta_io import MARK_PREFIX

    history = spark.sql(f"DESCRIBE HISTORY delta.`{table_path}`").collect()
    return {
        json.loads(r["userMetadata"].removeprefix(MARK_PREFIX))["batch"]: (
            "delta-rs" if str(r["engineInfo"]).startswith("delta-rs") else "spark"
        )
        for r in history
        if (r["userMetadata"] or "").startswith(MARK_PREFIX)
    }


def unmarked_commits(spark: SparkSession, table_path: str) -> list[tuple[str, str]]:
    """The operation and engine ("delta-rs" or "spark") of each commit no batch marked (a
    stream's compactions, folds and vacuums), oldest first."""
    from lakehouse.core.delta_io import MARK_PREFIX

    history = spark.sql(f"DESCRIBE HISTORY delta.`{table_path}`").collect()
    return [
        (r["operation"], "delta-rs" if str(r["engineInfo"]).startswith("delta-rs") else "spark")
        for r in sorted(history, key=lambda r: r["version"])
        if not (r["userMetadata"] or "").startswith(MARK_PREFIX)
    ]


# A view's table of partial rows (Table.partials_of), partitioned by hour, for the folds' tests.
FOLDED = replace(table("speed.event_counts_1m"), name="tests.folded_counts")


def write_partial_counts(
    spark: SparkSession, target: Table, settings: Settings, batches: list[tuple[int, int]]
) -> None:
    """A micro-batch's partial rows of FOLDED's view per (hour, events): an append each, as
    the stream makes them (2026-03-01, one click row a batch)."""
    from lakehouse.core.delta_io import append_small_batch
    from lakehouse.core.frames import rows_frame

    for batch_id, (hour, events) in enumerate(batches):
        at = datetime(2026, 3, 1, hour, 10, tzinfo=UTC)
        row = (at, at + timedelta(minutes=1), "click", events, Decimal("1.50"))
        frame = rows_frame(spark, [row], target.spark_schema())
        append_small_batch(frame, target, settings, "tests:fold", batch_id, True)
