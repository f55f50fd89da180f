"""The CDC reconciliation asked for by name: which captured tables, under which run id;
compare, and record (lakehouse.reconcile.changelog).

What `python -m jobs.cdc_reconcile`, `tributary compare --cdc` and the cdc DAG ask for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lakehouse.cdc.reconcile import ChangelogReconciliation, reconcile_changelog
from lakehouse.core.config import Settings
from lakehouse.core.locks import exclusive_writer
from lakehouse.core.tables import RECONCILE
from lakehouse.reconcile.changelog import result, summary_text, write_records
from lakehouse.reconcile.request import LOCK_WAIT_SECONDS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class BadChangelogRequest(ValueError):
    """The CDC reconciliation cannot be run as asked; nothing is written."""


def checked_tables(settings: Settings, tables: Sequence[str]) -> list[str] | None:
    """The tables asked for, each one the stream captures (cdc.tables); None: every one."""
    unknown = [t for t in tables if t not in settings.cdc.tables]
    if unknown:
        raise BadChangelogRequest(
            f"--table {', '.join(unknown)}: not captured (cdc.tables: "
            f"{', '.join(settings.cdc.tables)})"
        )
    return list(dict.fromkeys(tables)) or None


def checked_run_id(run_id: str | None, default: str) -> str:
    """The run's id as given, or `default` when none is."""
    if run_id is None:
        return default
    if not run_id.strip():
        raise BadChangelogRequest("--run-id is empty: give the run's identity, or leave it out")
    return run_id


@dataclass(frozen=True)
class ChangelogCompared:
    reconciliation: ChangelogReconciliation
    run_id: str
    recorded: bool

    @property
    def passed(self) -> bool:
        return self.reconciliation.equal

    def summary(self) -> str:
        return summary_text(self.reconciliation, self.run_id)

    def result(self) -> dict[str, Any]:
        return result(self.reconciliation, self.run_id, self.recorded)


def compare_changelog(
    spark: SparkSession,
    settings: Settings,
    run_id: str,
    started_at: datetime,
    tables: Sequence[str] | None = None,
    record: bool = True,
) -> ChangelogCompared:
    """Compare the captured tables and, with `record`, write their rows: the comparison runs
    without the reconcile writer's lock, the write waits for it (another reconciliation
    finishes in minutes)."""
    rec = reconcile_changelog(spark, settings, tables)
    if record:
        with exclusive_writer(settings, RECONCILE, wait_seconds=LOCK_WAIT_SECONDS):
            write_records(spark, settings, rec, run_id, started_at)
    return ChangelogCompared(rec, run_id, record)
