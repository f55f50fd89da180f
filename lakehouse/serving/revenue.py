"""The revenue view (purchases and revenue per hour, segment and category) served as the click
views are: batch.revenue_by_segment where the batch layer's recorded runs made it final
(lakehouse.joins.batch), speed.revenue_by_segment's partial rows, summed, after.

The coverage and the batch table's version come from one snapshot of ops.batch_runs, as for
the click views (lakehouse.serving.serve). Kappa mode has no batch layer, and a replay
version's enrichment is not what the serving pointer switches: the view is then served from
the live enrichment stream alone.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from lakehouse.core.config import Settings
from lakehouse.core.delta_io import read_table, read_table_at, table_exists
from lakehouse.joins.batch import REVENUE, TIME_COLUMN, VIEW
from lakehouse.joins.outputs import EnrichmentOutputs
from lakehouse.serving.serve import Coverage, NoServingDataError, batch_coverage, in_range
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
    coverage = Coverage([], None)
    parts = []
    if mode == "lambda":
        coverage = batch_coverage(spark, settings, VIEW)
        rows = read_table_at(spark, REVENUE, settings, coverage.table_version)
        if rows is not None:
            batch = rows.where(coverage.contains(TIME_COLUMN)).select(*VIEW_KEYS, *VIEW_MEASURES)
            parts.append(batch.withColumn("source", F.lit("batch")))
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
