"""The CDC reconciliation among the others: its rows in dq.reconciliation_runs, its summary,
and its verdict (lakehouse.cdc.reconcile compares; this records and tells).

One row per captured table and kind, its `view` the stream's table it judges (users_current,
users_history), `batch` (the recompute from bronze.<table>_changes) vs `cdc` (the changelog
stream's silver tables); and one for the view the stream maintains, `view` user_orders,
`batch` (lakehouse.transforms.user_orders over the stream's current tables) vs `cdc`
(silver.user_orders):

    compared / equal / unexplained   rows either side has / the same on both / differing
                                     (beyond_threshold too: no difference is allowed)
    open                             keys (for user_orders, users) left out: a change of
                                     theirs is still in flight
    range_end                        when the batch the comparison is as of completed
    note                             `as of changelog batch <id>`
    verdict, verdict_reasons         the row's own: failed when anything differs
    first_windows                    the first differing rows, named by key

The views' reconciliation table, not one of its own: its shape fits (two sides, counts, what
was left out, a verdict, the first differences), so whatever reads or looks after it (the
Tributary view's reconciliation list, maintenance, retention) covers the CDC rows as they are.
Nothing explains a CDC difference (explained is 0) and no threshold applies. A run's rows
carry its id with a `cdc:` prefix, so a CDC run never replaces a reconcile run's rows (both
replace their rows by run id); the rows are written under the reconcile writer's lock.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from lakehouse.cdc.reconcile import (
    ChangelogReconciliation,
    KindComparison,
    TableReconciliation,
    ViewReconciliation,
)
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import overwrite_where, small_frame
from lakehouse.core.tables import RECONCILE, table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

RUNS = table("dq.reconciliation_runs")
LEFT, RIGHT = "batch", "cdc"
RUN_PREFIX = "cdc:"
NOUNS = {"current": "keys", "history": "versions", "user_orders": "users"}
Compared = TableReconciliation | ViewReconciliation


def recorded_run_id(run_id: str) -> str:
    """The id a CDC run's rows carry: `cdc:<run id>` (see the module's rule)."""
    return run_id if run_id.startswith(RUN_PREFIX) else f"{RUN_PREFIX}{run_id}"


def view_name(t: Compared, k: KindComparison) -> str:
    """A captured table's kind: <table>_<kind> (users_current); a view: its name."""
    return t.table if isinstance(t, ViewReconciliation) else f"{t.table}_{k.kind}"


def as_of(rec: ChangelogReconciliation) -> str:
    return f"as of changelog batch {rec.batch_id} ({_when(rec.processed_at)})"


def difference_text(t: Compared, k: KindComparison) -> str:
    return f"{view_name(t, k)}: {k.differing} of {k.compared} {NOUNS[k.kind]} differ"


def failures(rec: ChangelogReconciliation) -> list[str]:
    """One line per table and kind that differs, with its first differing rows."""
    return [
        f"{difference_text(t, k)} (first: {'; '.join(k.examples)})"
        for t in rec.compared
        for k in t.kinds
        if k.differing
    ]


def verdict_text(rec: ChangelogReconciliation) -> str:
    if rec.equal:
        return (
            f"CDC reconciliation passed, {as_of(rec)}: every table equals its recompute from bronze"
            + (", every view its batch join" if rec.views else "")
        )
    differing = ", ".join(
        difference_text(t, k) for t in rec.compared for k in t.kinds if k.differing
    )
    return (
        f"CDC reconciliation failed, {as_of(rec)}: the stream's tables differ from their "
        f"recompute from bronze (a view from its batch join): {differing}"
    )


def run_rows(
    spark: SparkSession, rec: ChangelogReconciliation, run_id: str, started_at: datetime
) -> DataFrame:
    rows = []
    for t in rec.compared:
        for k in t.kinds:
            note = "; ".join(filter(None, [as_of(rec), t.note]))
            rows.append(
                {
                    "run_id": recorded_run_id(run_id),
                    "view": view_name(t, k),
                    "left_source": LEFT,
                    "right_source": RIGHT,
                    "started_at": started_at,
                    "range_start": None,
                    "range_end": rec.processed_at,
                    "compared": k.compared,
                    "equal": k.equal,
                    "explained": 0,
                    "unexplained": k.differing,
                    "beyond_threshold": k.differing,
                    "open": t.in_flight_keys,
                    "verdict": "failed" if k.differing else "passed",
                    "verdict_reasons": [difference_text(t, k)] if k.differing else [],
                    "first_windows": list(k.examples),
                    "thresholds": {},
                    "max_unexplained_windows": 0,
                    "report_path": None,
                    "note": note,
                }
            )
    return small_frame(spark, rows, RUNS)


def write_records(
    spark: SparkSession,
    settings: Settings,
    rec: ChangelogReconciliation,
    run_id: str,
    started_at: datetime,
) -> None:
    """Replace the run's rows (a retry of the run id writes them again, once). The caller
    holds the reconcile writer's lock."""
    recorded = recorded_run_id(run_id).replace("\\", "\\\\").replace("'", "\\'")
    this_run = f"run_id = '{recorded}' AND right_source = '{RIGHT}'"
    overwrite_where(run_rows(spark, rec, run_id, started_at), RUNS, settings, RECONCILE, this_run)


COLUMNS = ("compared", "equal", "differ", "in flight")


def summary_text(rec: ChangelogReconciliation, run_id: str) -> str:
    """The terminal's summary: one line per table and kind, the first differences, the
    verdict last."""
    names = [view_name(t, k) for t in rec.compared for k in t.kinds]
    width = max([len(n) for n in names] + [5])
    lines = [
        f"CDC reconciliation {recorded_run_id(run_id)}: {LEFT} (recomputed from bronze) vs "
        f"{RIGHT} (the changelog stream), {as_of(rec)}",
        f"  {'table':<{width}}  " + "  ".join(f"{c:>9}" for c in COLUMNS),
    ]
    for t in rec.compared:
        for k in t.kinds:
            values = (k.compared, k.equal, k.differing, t.in_flight_keys)
            note = f"  ({t.note})" if t.note else ""
            cells = "  ".join(f"{x:>9}" for x in values)
            lines.append(f"  {view_name(t, k):<{width}}  {cells}{note}")
    lines.append("  in flight = keys with a change beyond that batch (left out)")
    if rec.views:
        lines.append("  user_orders = the view vs its batch join of the current tables, by user")
    shown = [f"  {view_name(t, k)} {e}" for t in rec.compared for k in t.kinds for e in k.examples]
    if shown:
        lines.append("first differences:")
        lines += shown
    lines.append(verdict_text(rec))
    return "\n".join(lines)


def result(rec: ChangelogReconciliation, run_id: str, recorded: bool) -> dict[str, Any]:
    """What a caller reports (the job's result line)."""
    return {
        "run_id": recorded_run_id(run_id),
        "recorded": recorded,
        "passed": rec.equal,
        "batch_id": rec.batch_id,
        "processed_at": rec.processed_at,
        "verdict": verdict_text(rec),
        "failures": failures(rec),
        "tables": {
            t.table: {
                "in_flight": t.in_flight_keys,
                "note": t.note,
                **{
                    k.kind: {"compared": k.compared, "equal": k.equal, "differing": k.differing}
                    for k in t.kinds
                },
            }
            for t in rec.tables
        },
        "views": {
            t.table: {
                "in_flight": t.in_flight_keys,
                "note": t.note,
                "compared": t.comparison.compared,
                "equal": t.comparison.equal,
                "differing": t.comparison.differing,
            }
            for t in rec.views
        },
    }


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
