"""A run's results in the dq.* tables, keyed by the run's identity so history can be queried.

    dq.reconciliation_windows  one row per compared view key (open ones are only counted):
                               key and measures as maps, so every view fits one schema
    dq.reconciliation_runs     one row per view: counts per status, verdict, report (last)

Both writes replace exactly the run's rows (Delta replaceWhere on run_id): a retry of the
same run id rewrites the same rows, never adds a second copy. The runs row is written last,
so a run killed half-way is never taken as recorded.
"""

from __future__ import annotations

from functools import reduce
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from lakehouse.core.config import Settings
from lakehouse.core.delta_io import overwrite_where, small_frame
from lakehouse.core.frames import rows_frame
from lakehouse.core.tables import RECONCILE, table
from lakehouse.reconcile.compare import OPEN
from lakehouse.reconcile.gate import GateVerdict, describe_window

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakehouse.reconcile.run import Reconciliation, ViewComparison

WINDOWS = table("dq.reconciliation_windows")
RUNS = table("dq.reconciliation_runs")


def window_records(run: Reconciliation, v: ViewComparison) -> DataFrame | None:
    if v.result is None:
        return None
    keys = F.create_map(*(x for k in v.keys for x in (F.lit(k), F.col(k).cast("string"))))
    measures = F.create_map(
        *(
            x
            for m in v.metrics
            for x in (
                F.lit(m),
                F.struct(
                    *(
                        F.col(f"{prefix}_{m}").cast("double").alias(name)
                        for prefix, name in (
                            ("left", "left"),
                            ("right", "right"),
                            ("diff", "difference"),
                            ("unexplained", "unexplained"),
                        )
                    )
                ),
            )
        )
    )
    return v.result.where(F.col("status") != OPEN).select(
        F.lit(run.run_id).alias("run_id"),
        F.lit(v.view).alias("view"),
        F.lit(run.left).alias("left_source"),
        F.lit(run.right).alias("right_source"),
        keys.alias("key"),
        F.col(v.time_column).alias("window_time"),
        measures.alias("measures"),
        "status",
        "beyond_threshold",
        "explanation",
    )


def write_records(
    spark: SparkSession,
    settings: Settings,
    run: Reconciliation,
    verdict: GateVerdict,
    report_path: str | None,
) -> None:
    this_run = f"run_id = {_sql_string(run.run_id)}"
    parts = [df for df in (window_records(run, v) for v in run.views) if df is not None]
    windows = (
        reduce(lambda a, b: a.unionByName(b), parts)
        if parts
        else rows_frame(spark, [], WINDOWS.spark_schema())
    )
    overwrite_where(windows, WINDOWS, settings, RECONCILE, this_run)
    overwrite_where(run_rows(spark, run, verdict, report_path), RUNS, settings, RECONCILE, this_run)


def run_rows(
    spark: SparkSession, run: Reconciliation, verdict: GateVerdict, report_path: str | None
) -> DataFrame:
    rows = [
        {
            "run_id": run.run_id,
            "view": v.view,
            "left_source": run.left,
            "right_source": run.right,
            "started_at": run.started_at,
            "range_start": run.scope[0],
            "range_end": run.scope[1],
            "compared": v.compared,
            **{status: v.counts[status] for status in ("equal", "explained", "unexplained")},
            "beyond_threshold": v.beyond_threshold,
            "open": v.counts[OPEN],
            "verdict": "passed" if verdict.passed else "failed",
            "verdict_reasons": verdict.reasons,
            "first_windows": [
                f"{describe_window(v.keys, r)}: {r['explanation']}"
                for r in v.unexplained
                if r["beyond_threshold"]
            ][:5],
            "thresholds": run.thresholds,
            "max_unexplained_windows": run.max_unexplained_windows,
            "report_path": report_path,
            "note": v.note,
        }
        for v in run.views
    ]
    return small_frame(spark, rows, RUNS)


def _sql_string(text: str) -> str:
    """A SQL string literal: Airflow run ids hold ':', '+' and could hold quotes."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
