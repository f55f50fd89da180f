"""The revenue view (purchases and revenue per hour, segment and category) served as the click
views are: batch.revenue_by_segment where the batch layer's recorded runs made it final
(lakehouse.joins.batch), speed.revenue_by_segment's partial rows, summed, after.

The coverage and the batch table's version come from one snapshot of ops.batch_runs, as for
the click views (lakehouse.serving.serve). In kappa mode the corrected side is the active
replay version's enrichment (jobs.enrich_replay): its partial rows up to the batch its last
passed check judged (lakehouse.joins.checks), covering its windows up to an hour before the
version's watermark as of its pins, as its click views are covered, and only when that check
had read every event of the version's events at their pin. Otherwise the view is served
from the live enrichment stream alone, as it is while no version is active.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from lakehouse.core.config import Settings
from lakehouse.core.delta_io import read_table, read_table_at, table_exists
from lakehouse.joins.batch import REVENUE, TIME_COLUMN, VIEW, WINDOW
from lakehouse.joins.checks import last_passed_batch
from lakehouse.joins.outputs import EnrichmentOutputs
from lakehouse.serving.serve import (
    CorrectedSide,
    Coverage,
    NoServingDataError,
    batch_coverage,
    checked_watermark,
    covered_until,
    in_range,
)
from lakehouse.transforms.enrichment import VIEW_KEYS, VIEW_MEASURES, combine_revenue

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def serve_revenue(
    spark: SparkSession,
    settings: Settings,
    start: datetime | None,
    end: datetime | None,
    mode: str,
) -> tuple[DataFrame, Coverage]:
    """The view's windows that start in [start, end), each from the side that owns it, with
    a `source` column ('batch' or 'speed')."""
    corrected = batch_side(spark, settings) if mode == "lambda" else version_side(spark, settings)
    coverage = corrected.coverage
    parts = []
    if corrected.rows is not None:
        rows = corrected.rows.where(coverage.contains(TIME_COLUMN))
        parts.append(
            rows.select(*VIEW_KEYS, *VIEW_MEASURES).withColumn("source", F.lit(corrected.name))
        )
    speed = EnrichmentOutputs.live().revenue
    if table_exists(spark, speed, settings):
        summed = combine_revenue(read_table(spark, speed, settings).drop("batch_id"))
        fresh = summed.where(~coverage.contains(TIME_COLUMN))
        parts.append(fresh.withColumn("source", F.lit("speed")))
    if not parts:
        raise NoServingDataError(
            f"nothing to serve for {VIEW}: neither batch.{VIEW} nor {speed.name} has results "
            "yet (run the enrichment stream: python -m jobs.enrich)"
        )
    return in_range(parts, TIME_COLUMN, start, end), coverage


def batch_side(spark: SparkSession, settings: Settings) -> CorrectedSide:
    """batch.revenue_by_segment where the batch layer's recorded runs made it final."""
    coverage = batch_coverage(spark, settings, VIEW)
    rows = read_table_at(spark, REVENUE, settings, coverage.table_version)
    return CorrectedSide("batch", rows, coverage)


def version_side(spark: SparkSession, settings: Settings) -> CorrectedSide:
    """The active replay version's enrichment, as far as its last passed check bears it out
    (the module's docstring); nothing while the live tables are served."""
    from lakehouse.replay.versions import EVENTS_PIN, LIVE, outputs_of, served_version

    nothing = CorrectedSide(LIVE, None, Coverage([], None, LIVE))
    active, pins = served_version(settings)
    if active == LIVE or (pins is not None and EVENTS_PIN not in pins):
        return nothing  # a version pinned before its events were cannot say what it covered
    enrichment = EnrichmentOutputs.replay(active)
    batch = last_passed_batch(settings, enrichment, None if pins is None else pins[EVENTS_PIN])
    if batch is None:
        return nothing
    watermark = checked_watermark(spark, settings, outputs_of(active), pins)
    partials = read_table(spark, enrichment.revenue, settings).where(F.col("batch_id") <= batch)
    rows = combine_revenue(partials.drop("batch_id"))
    coverage = covered_until(rows, enrichment.name, TIME_COLUMN, watermark, WINDOW)
    return CorrectedSide(enrichment.name, rows, coverage)
