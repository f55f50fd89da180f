"""The demo's join part: the click events joined with the user and the product valid at each
event's time (the enrichment stream, run `availableNow` here over silver.events and the
history tables the change data capture part filled), the revenue per segment and category it
keeps, and the judge's verdict: the same join recomputed at once from the history tables.

When the enrichment DAG's stream is running, it enriches the events itself and the demo only
says so. Any failure is one line, never raised: the rest of the demo stands on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakehouse.core.config import Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REVENUE_ROWS_SHOWN = 6


@dataclass(frozen=True)
class JoinsReport:
    failed: str | None  # why the part could not run (one line), or None
    # (dimension, match status, events), over each event's latest enrichment
    matches: tuple[tuple[str, str, int], ...] = ()
    revenue: tuple[dict[str, Any], ...] = ()  # the view's newest rows, largest first
    verdict: str = ""
    batch: str = ""  # the batch layer's revenue view: recomputed, and served from where

    def lines(self) -> list[str]:
        """The report as the demo prints it."""
        if self.failed is not None:
            return [f"==> stream-table join: not shown: {self.failed}"]
        out = ["==> stream-table join: each event with its user and product as of its time"]
        for dimension in ("user", "product"):
            counts = [f"{s} {n}" for d, s, n in self.matches if d == dimension]
            out.append(f"    {dimension + 's:':9} " + ", ".join(counts))
        out.append("    speed.revenue_by_segment, the newest hours (segment, category):")
        for r in self.revenue:
            out.append(
                f"      {r['window_start']:%Y-%m-%d %H:%M}  {r['segment']:10} "
                f"{r['category']:14} {r['purchases']:4} purchases  {r['revenue']:>10}"
            )
        out.append(f"    {self.verdict}")
        if self.batch:
            out.append(f"    {self.batch}")
        return out


def run_joins_demo(
    spark: SparkSession, settings: Settings, say: Callable[[str], None]
) -> JoinsReport:
    from lakehouse.core.locks import WriterBusyError
    from lakehouse.core.paths import enrichment_stop_file
    from lakehouse.joins.reconcile import NothingToReconcile, reconcile_enrichment
    from lakehouse.joins.stream import run_enrichment

    try:
        say("==> running the enrichment stream until it has read silver.events")
        run_enrichment(settings, enrichment_stop_file(), True, say)
        judged = reconcile_enrichment(spark, settings)
    except WriterBusyError:
        return JoinsReport(
            failed="the enrichment stream is running (the enrichment DAG) and enriches "
            "these events itself"
        )
    except NothingToReconcile as err:
        return JoinsReport(failed=str(err))
    verdict = (
        f"judge: {judged.events.compared} events and {judged.windows.compared} windows equal "
        "their recompute"
        if judged.equal
        else f"judge: {judged.events.differing} of {judged.events.compared} events and "
        f"{judged.windows.differing} of {judged.windows.compared} windows differ from their "
        "recompute: see python -m jobs.enrich_reconcile"
    )
    return JoinsReport(
        None,
        match_counts(spark, settings),
        newest_rows(spark, settings),
        verdict,
        revenue_batch(spark, settings, say),
    )


def revenue_batch(spark: SparkSession, settings: Settings, say: Callable[[str], None]) -> str:
    """The batch layer's revenue view recomputed for the last closed hour, and how many of
    the served view's rows come from each side of the seam; or why it was not recomputed.
    Nothing in kappa mode, which has no batch layer."""
    from datetime import UTC, datetime, timedelta

    from lakehouse.batch.recompute import Interval, NoDataError
    from lakehouse.core.locks import WriterBusyError, exclusive_writer
    from lakehouse.core.tables import BATCH
    from lakehouse.joins.batch import recompute_revenue
    from lakehouse.ops.demo import BATCH_LOCK_WAIT_SECONDS
    from lakehouse.serving.serve import serve

    if settings.mode == "kappa":
        return ""
    now = datetime.now(UTC)
    hour = now.replace(minute=0, second=0, microsecond=0)
    interval = Interval(hour - timedelta(hours=1), hour)
    say(f"==> batch layer: recomputing the revenue view for {interval}")
    try:
        with exclusive_writer(settings, BATCH, wait_seconds=BATCH_LOCK_WAIT_SECONDS):
            run = recompute_revenue(spark, settings, interval, f"demo:{now:%Y%m%dT%H%M%S}")
    except (NoDataError, WriterBusyError) as err:
        return f"batch.revenue_by_segment: not recomputed: {err}"
    served, _ = serve(spark, settings, "revenue_by_segment", mode="lambda")
    sources = served.groupBy("source").count().orderBy("source").collect()
    counts = ", ".join(f"{r['count']} from {r['source']}" for r in sources) or "no row yet"
    return (
        f"batch.revenue_by_segment: {run.rows} rows recomputed for {interval}, final until "
        f"{run.final_until:%H:%M}; `tributary query revenue_by_segment` serves {counts}"
    )


def match_counts(spark: SparkSession, settings: Settings) -> tuple[tuple[str, str, int], ...]:
    from lakehouse.core.delta_io import read_table
    from lakehouse.joins.corrections import latest_rows
    from lakehouse.joins.enrichment import ENRICHED

    latest = latest_rows(read_table(spark, ENRICHED, settings))
    counts = []
    for dimension in ("user", "product"):
        column = f"{dimension}_match"
        for row in latest.groupBy(column).count().orderBy("count", ascending=False).collect():
            counts.append((dimension, str(row[column]), int(row["count"])))
    return tuple(counts)


def newest_rows(spark: SparkSession, settings: Settings) -> tuple[dict[str, Any], ...]:
    from pyspark.sql import functions as F

    from lakehouse.core.delta_io import read_table
    from lakehouse.joins.enrichment import REVENUE
    from lakehouse.transforms.enrichment import combine_revenue

    view = combine_revenue(read_table(spark, REVENUE, settings).drop("batch_id"))
    newest = view.orderBy(F.col("window_start").desc(), F.col("revenue").desc())
    rows = newest.limit(REVENUE_ROWS_SHOWN).collect()
    return tuple(r.asDict() for r in rows)
