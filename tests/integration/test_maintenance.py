"""The maintenance job against real Spark and Delta on local disk: many small files become
one with the same rows, the replaced files leave the disk, a promoted version's served tables
and a busy writer's tables are left as they are.

The lakehouse of small files is built once; each test works on a copy of it, and the job runs
in the test's process."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from delta.tables import DeltaTable

from jobs.contract import Exit
from lakehouse.core.config import Settings, load_settings
from lakehouse.core.frames import rows_frame
from lakehouse.core.locks import exclusive_writer
from lakehouse.core.tables import REPLAY, Table, table
from lakehouse.ops.maintenance import maintain, tables_to_maintain
from lakehouse.replay.versions import record_version_event, switch_pointer, table_versions
from lakehouse.speed.outputs import SpeedOutputs
from tests.jobs_in_process import RunJob

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

V1 = SpeedOutputs.replay("v1")
# A table is compacted from this many files on (maintenance.compact_at_files, lowered from its
# default so that a few commits make a table of small files); SMALL commits make one.
COMPACT_AT = 4
SMALL = COMPACT_AT


def append_rows(spark: SparkSession, t: Table, settings: Settings, commits: int) -> None:
    for i in range(commits):
        row = rows_frame(spark, [(i, f"row {i}")], "n long, note string").coalesce(1)
        row.write.format("delta").mode("append").save(t.path(settings))


def files(spark: SparkSession, t: Table, settings: Settings) -> tuple[int, int]:
    """(files the table's latest version reads, data files on disk)."""
    in_table = DeltaTable.forPath(spark, t.path(settings)).detail().first()["numFiles"]
    on_disk = [p for p in Path(t.path(settings)).rglob("*.parquet") if "_delta_log" not in p.parts]
    return in_table, len(on_disk)


def rows(spark: SparkSession, t: Table, settings: Settings) -> list[tuple]:
    return sorted(tuple(r) for r in spark.read.format("delta").load(t.path(settings)).collect())


def lake_env(root: Path) -> dict[str, str]:
    return {
        "TRIBUTARY_PROFILE": "local",
        "TRIBUTARY__STORAGE__ROOT": str(root / "lakehouse"),
        "TRIBUTARY__STORAGE__CHECKPOINTS": str(root / "checkpoints"),
        "TRIBUTARY__MAINTENANCE__COMPACT_AT_FILES": str(COMPACT_AT),
    }


def settings_in(root: Path) -> Settings:
    return load_settings("local", {**os.environ, **lake_env(root)})


@pytest.fixture(scope="module")
def small_files(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lakehouse with small files, to copy."""
    root = tmp_path_factory.mktemp("small_files")
    a_lakehouse_with_small_files(spark, settings_in(root))
    return root / "lakehouse"


@pytest.fixture
def copied(small_files: Path, tmp_path: Path) -> Path:
    """A copy of the lakehouse with small files, in the test's folder; the folder."""
    shutil.copytree(small_files, tmp_path / "lakehouse")
    return tmp_path


def a_lakehouse_with_small_files(spark: SparkSession, settings: Settings) -> None:
    """SMALL version events (SMALL commits); SMALL commits to v1's silver and to its progress;
    v1 promoted (serving reads its progress at the promotion's pins), then rolled back."""
    for i in range(SMALL - 1):
        record_version_event(spark, settings, "v1", "extending", sequence=i + 1)
    record_version_event(spark, settings, "v1", "caught_up")
    append_rows(spark, V1.silver, settings, SMALL)
    append_rows(spark, V1.progress, settings, SMALL)
    pins = table_versions(settings, "v1")
    switch_pointer(spark, settings, "promote", "v1", "v1", pins=pins)
    # Rolled back: serving would read v1 at those pins again after a rollback to it.
    switch_pointer(spark, settings, "rollback", "v1", "live")


def test_the_job_compacts_small_files_and_deletes_the_replaced_ones_rows_unchanged(
    spark: SparkSession, copied: Path, run_job_here: RunJob
) -> None:
    settings = settings_in(copied)
    versions = table("ops.replay_versions")
    before = {t.name: rows(spark, t, settings) for t in (versions, V1.silver, V1.progress)}
    assert files(spark, versions, settings) == (SMALL, SMALL)

    done = run_job_here(
        "jobs.maintenance",
        **lake_env(copied),
        # Replaced files are deleted at once here; the default keeps them a week.
        TRIBUTARY__MAINTENANCE__VACUUM_AFTER_HOURS="0",
    )
    assert done.returncode == Exit.OK, done.stderr[-3000:]
    compacted = f"ops.replay_versions: {SMALL} -> 1 files, {SMALL} old files deleted"
    assert compacted in done.stdout, done.stdout
    assert "left alone: replay_v1.active_users_10m" in done.stdout, done.stdout
    [line] = [x for x in done.stdout.splitlines() if x.startswith("maintenance result: ")]
    result = json.loads(line.split(": ", 1)[1])
    assert result["busy"] == [] and result["deleted_files"] >= 2 * SMALL, result

    assert files(spark, versions, settings) == (1, 1)
    assert files(spark, V1.silver, settings) == (1, 1)
    # Serving would read v1's progress at its pinned version: neither compacted nor vacuumed.
    assert files(spark, V1.progress, settings) == (SMALL, SMALL)
    # Two files, under compact_at_files: only vacuumed.
    assert files(spark, table("ops.serving_pointer"), settings) == (2, 2)
    after = {t.name: rows(spark, t, settings) for t in (versions, V1.silver, V1.progress)}
    assert after == before


def test_a_busy_writers_tables_are_left_for_the_next_run(spark: SparkSession, copied: Path) -> None:
    copy = settings_in(copied)
    settings = copy.model_copy(
        update={"maintenance": copy.maintenance.model_copy(update={"lock_wait_seconds": 0})}
    )
    by_writer, _ = tables_to_maintain(spark, settings)
    with exclusive_writer(settings, REPLAY):  # a replay is running
        cared, busy = maintain(spark, settings, by_writer, on_line=lambda _: None)
    [left] = busy
    assert "ops.replay_versions" in left.tables and "replay_v1.events" in left.tables
    assert "replay is already running" in left.reason and "next run" in left.reason
    assert [c.table for c in cared] == ["ops.serving_pointer"]
    assert files(spark, table("ops.replay_versions"), settings) == (SMALL, SMALL)
