"""Where a run's results go: the HTML report on disk and the dq.* tables."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from lakehouse.core.paths import dq_dir, run_file_name
from lakehouse.reconcile.gate import GateVerdict
from lakehouse.reconcile.records import write_records
from lakehouse.reconcile.report import write_report

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakehouse.core.config import Settings
    from lakehouse.reconcile.run import Reconciliation


def report_path(run_id: str) -> Path:
    """{state}/dq/reports/<run id>.html."""
    return dq_dir() / "reports" / f"{run_file_name(run_id)}.html"


def publish(
    spark: SparkSession, settings: Settings, run: Reconciliation, verdict: GateVerdict
) -> Path:
    """Write the report, then the dq records that point to it; returns the report's path."""
    path = write_report(run, verdict, report_path(run.run_id))
    write_records(spark, settings, run, verdict, str(path))
    return path
