"""Looking after the tables no stream looks after (jobs/maintenance.py).

The speed layer compacts and vacuums its own tables as it runs, and the batch job vacuums the
batch views. The bookkeeping tables (ops.*, dq.*) and finished replay versions get a few
commits a run, each a small file every later read opens: ops.batch_runs alone gains three an
hour, and the serving layer reads it on every query. Each is compacted once it has enough
files, and the files no version newer than the retention reads are deleted, while its writer's
lock is held, so no run of its writer commits in between.

The tables serving reads of a promoted replay version are left alone: serving reads them at
the versions its gate passed (lakehouse.replay.versions), now or after a rollback to it, and a
compaction and a vacuum would delete those versions' files.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse.core.config import Settings
from lakehouse.core.delta_io import table_exists
from lakehouse.core.delta_maintenance import compact_small_files, vacuum_replaced_files
from lakehouse.core.locks import WriterBusyError, exclusive_writer
from lakehouse.core.tables import REPLAY, Table, table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

BOOKKEEPING = (
    "ops.batch_runs",
    "ops.replay_versions",
    "ops.serving_pointer",
    "dq.reconciliation_runs",
    "dq.reconciliation_windows",
    "dq.quality_runs",
    "dq.quality_quarantine",
)


@dataclass(frozen=True)
class Cared:
    table: str
    files_before: int
    files_after: int
    deleted_files: int  # by the vacuum: replaced, or never committed
    seconds: float

    def describe(self) -> str:
        return (
            f"{self.table}: {self.files_before} -> {self.files_after} files, "
            f"{self.deleted_files} old files deleted ({self.seconds:.1f} s)"
        )


@dataclass(frozen=True)
class LeftAlone:
    tables: tuple[str, ...]
    reason: str

    def describe(self) -> str:
        return f"left alone: {', '.join(self.tables)}: {self.reason}"


def tables_to_maintain(
    spark: SparkSession, settings: Settings
) -> tuple[dict[str, list[Table]], LeftAlone | None]:
    """The tables to look after, by the writer whose lock guards them; and those left alone."""
    from lakehouse.replay.versions import (
        PINNING,
        list_versions,
        outputs_of,
        pointer_history,
        served_tables,
    )

    by_writer: dict[str, list[Table]] = {}
    for name in BOOKKEEPING:
        t = table(name)
        by_writer.setdefault(t.writer, []).append(t)
    versions = [v for v in list_versions(settings) if v.status != "removed"]
    # Serving reads a promoted version at its pins, now or after a rollback to it.
    promoted = {r["version"] for r in pointer_history(settings) if r["action"] in PINNING}
    promoted &= {v.version for v in versions}
    pinned = {t.name for v in promoted for t in served_tables(v).values()}
    for info in versions:
        outputs = outputs_of(info.version)
        mine = [outputs.quarantine, outputs.silver, outputs.late, outputs.progress]
        mine += [outputs.counts, outputs.active_users, outputs.sessions]
        by_writer.setdefault(REPLAY, []).extend(t for t in mine if t.name not in pinned)
    reason = f"serving reads {', '.join(sorted(promoted))} at pinned versions (promoted)"
    return by_writer, (LeftAlone(tuple(sorted(pinned)), reason) if pinned else None)


def look_after(spark: SparkSession, settings: Settings, t: Table) -> Cared:
    """Compact `t` if it has enough files, then vacuum it."""
    from delta.tables import DeltaTable

    care = settings.maintenance
    began = time.monotonic()
    delta = DeltaTable.forPath(spark, t.path(settings))
    before = int(delta.detail().first()["numFiles"])  # type: ignore[index]
    if before >= care.compact_at_files:
        compact_small_files(spark, t, settings, care.compact_files_below_mb << 20)
    after = int(delta.detail().first()["numFiles"])  # type: ignore[index]
    vacuum_replaced_files(spark, t, settings, care.vacuum_after_hours)
    [last] = delta.history(1).collect()
    metrics = (last["operationMetrics"] or {}) if last["operation"] == "VACUUM END" else {}
    deleted = int(metrics.get("numDeletedFiles", 0))
    return Cared(t.name, before, after, deleted, time.monotonic() - began)


def maintain(
    spark: SparkSession,
    settings: Settings,
    by_writer: dict[str, list[Table]],
    on_line: Callable[[str], None] = print,
) -> tuple[list[Cared], list[LeftAlone]]:
    """Look after every existing table, holding its writer's lock; a writer still busy after
    `maintenance.lock_wait_seconds` keeps its tables as they are until the next run."""
    cared, left = [], []
    for writer, tables in by_writer.items():
        existing = [t for t in tables if table_exists(spark, t, settings)]
        if not existing:
            continue
        try:
            with exclusive_writer(settings, writer, settings.maintenance.lock_wait_seconds):
                for t in existing:
                    cared.append(look_after(spark, settings, t))
                    on_line(f"    {cared[-1].describe()}")
        except WriterBusyError as err:
            left.append(LeftAlone(tuple(t.name for t in existing), f"{err}; next run"))
            on_line(f"    {left[-1].describe()}")
    return cared, left
