"""The reconciliation gate: may what was compared be trusted (published, promoted)?

It fails when more windows than allowed have an unexplained difference beyond their metric's
threshold. A promotion step (a replay version replacing the live views) also asks that
something was compared at all: comparing nothing proves nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakehouse.core.config import Settings
    from lakehouse.reconcile.run import Reconciliation, ViewComparison

FIRST_WINDOWS = 5  # windows named in a failure message


@dataclass(frozen=True)
class GateVerdict:
    passed: bool
    beyond_threshold: int  # windows unexplained beyond their threshold, all views
    reasons: list[str]  # why it failed (empty when it passed)
    first_windows: list[str]  # the first such windows, one line each

    def message(self) -> str:
        if self.passed:
            return "reconciliation gate passed"
        lines = ["reconciliation gate failed: " + "; ".join(self.reasons)]
        lines += [f"  {w}" for w in self.first_windows]
        return "\n".join(lines)


def gate(reconciliation: Reconciliation, require_compared: bool = False) -> GateVerdict:
    """Passed, or failed with the reasons and the first windows beyond threshold."""
    return gate_views(
        reconciliation.views, reconciliation.max_unexplained_windows, require_compared
    )


def gate_views(
    views: Sequence[ViewComparison], max_unexplained_windows: int, require_compared: bool = False
) -> GateVerdict:
    beyond = sum(v.beyond_threshold for v in views)
    reasons = []
    if beyond > max_unexplained_windows:
        per_view = ", ".join(f"{v.view} {v.beyond_threshold}" for v in views if v.beyond_threshold)
        reasons.append(
            f"{beyond} window(s) with an unexplained difference beyond threshold "
            f"(allowed {max_unexplained_windows}): {per_view}"
        )
    if require_compared and not any(v.compared for v in views):
        reasons.append("no window was final on both sides: nothing was compared")
    first = [
        f"{v.view} {describe_window(v.keys, row)}: {row['explanation']}"
        for v in views
        for row in v.unexplained
        if row["beyond_threshold"]
    ][:FIRST_WINDOWS]
    return GateVerdict(not reasons, beyond, reasons, first if beyond else [])


def describe_window(keys: Sequence[str], row: dict[str, Any]) -> str:
    """`2026-11-25T10:03Z event_type=click`: times first, then the other keys."""
    times = [row[k].strftime("%Y-%m-%dT%H:%M:%SZ") for k in keys if hasattr(row[k], "strftime")]
    others = [f"{k}={row[k]}" for k in keys if not hasattr(row[k], "strftime")]
    return " ".join([*times, *others])


def recorded_gate(
    spark: SparkSession, settings: Settings, run_id: str, require_compared: bool = True
) -> GateVerdict:
    """The gate of a run recorded in dq.reconciliation_runs (what a promotion step checks)."""
    from pyspark.sql import functions as F

    from lakehouse.core.delta_io import read_table, table_exists
    from lakehouse.core.tables import table

    runs = table("dq.reconciliation_runs")
    if not table_exists(spark, runs, settings):
        return GateVerdict(False, 0, [f"no reconciliation run recorded ({runs.name} is empty)"], [])
    rows = read_table(spark, runs, settings).where(F.col("run_id") == run_id).collect()
    if not rows:
        return GateVerdict(False, 0, [f"no reconciliation run {run_id!r} recorded"], [])
    beyond = sum(int(r["beyond_threshold"]) for r in rows)
    # Every row of a run carries the run's verdict; the reasons are the same on each.
    reasons = list(rows[0]["verdict_reasons"] or [])
    if require_compared and not sum(int(r["compared"]) for r in rows):
        reasons.append("no window was final on both sides: nothing was compared")
    first = [w for r in rows for w in (r["first_windows"] or [])][:FIRST_WINDOWS]
    return GateVerdict(not reasons, beyond, reasons, first)
