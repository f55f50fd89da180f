"""The enrichment stream: silver.events, as the speed layer appends it, joined as of event
time with the shop's history tables (lakehouse.joins.enrichment), run until asked to stop.

It reads silver.events as a Delta stream (the rows each commit adds; a commit that rewrites
rows fails the query rather than be skipped) and stops as the speed layer does: Ctrl-C,
SIGTERM or a stop file lets the running batch commit first, and a restart continues from its
checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from lakehouse.core.config import Settings
from lakehouse.core.delta_io import appended_rows
from lakehouse.core.storage import StorageError
from lakehouse.core.tables import ENRICH, table
from lakehouse.joins.enrichment import EnrichmentProcessor
from lakehouse.speed.stream import run_stream, started

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

QUERY_NAME = "enrichment"
SILVER = table("silver.events")


def enrichment_checkpoint(settings: Settings) -> str:
    return f"{settings.storage.checkpoints}/{ENRICH}/{QUERY_NAME}"


def start_enrichment_query(
    spark: SparkSession, settings: Settings, available_now: bool
) -> StreamingQuery:
    """The query over silver.events, from its first version on a first start."""
    from lakehouse.core.delta_io import table_exists

    if not table_exists(spark, SILVER, settings):
        raise StorageError(
            f"no {SILVER.name} at {SILVER.path(settings)} yet: run the speed layer first "
            "(`make demo`, or the speed_layer DAG)"
        )
    checkpoint = enrichment_checkpoint(settings)
    writer = (
        appended_rows(spark, SILVER, settings)
        .writeStream.queryName(QUERY_NAME)
        .foreachBatch(EnrichmentProcessor(settings, checkpoint))
        .option("checkpointLocation", checkpoint)
    )
    return started(writer, settings, available_now)


def run_enrichment(
    settings: Settings, stop_file: Path, available_now: bool, say: Callable[[str], None]
) -> None:
    """Run the enrichment stream until asked to stop (or, `available_now`, until it has read
    what silver holds). Raises QueryFailedError when the query stops on an error."""
    run_stream(
        settings,
        ENRICH,
        "enrichment stream",
        stop_file,
        lambda spark: start_enrichment_query(spark, settings, available_now),
        say,
    )
