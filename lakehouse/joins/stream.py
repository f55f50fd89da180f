"""The enrichment stream: silver.events, as the speed layer appends it, joined as of event
time with the shop's history tables (lakehouse.joins.enrichment), run until asked to stop.

It reads silver.events as a Delta stream (the rows each commit adds; a commit that rewrites
rows fails the query rather than be skipped) and stops as the speed layer does: Ctrl-C,
SIGTERM or a stop file lets the running batch commit first, and a restart continues from its
checkpoint.

Its output tables belong to its checkpoint (lakehouse.core.stream_outputs): a query on
another is refused until they are reset (`reset_enrichment`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from lakehouse.core.config import Settings
from lakehouse.core.delta_io import appended_rows
from lakehouse.core.storage import StorageError
from lakehouse.core.stream_outputs import check_own_outputs, replay_again, reset_outputs
from lakehouse.joins.enrichment import EnrichmentProcessor
from lakehouse.joins.outputs import EnrichmentOutputs
from lakehouse.speed.stream import run_stream, started

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery


def enrichment_checkpoint(settings: Settings) -> str:
    return EnrichmentOutputs.live().checkpoint(settings)


def check_own_checkpoint(
    spark: SparkSession, settings: Settings, outputs: EnrichmentOutputs
) -> None:
    """OtherCheckpointError unless the outputs' batches are those of their checkpoint's query
    (lakehouse.core.stream_outputs)."""
    if outputs.name == "live":
        fix = (
            "put that checkpoint back, or start afresh with `python -m jobs.enrich --reset` "
            "(it removes the enrichment's tables and checkpoint; the stream then enriches all "
            "of silver.events again)"
        )
    else:
        version = outputs.name.removeprefix("replay_")
        fix = replay_again(version)
    check_own_outputs(
        spark,
        settings,
        output=outputs.enriched,
        progress=outputs.progress,
        checkpoint=outputs.checkpoint(settings),
        app_prefix=f"{outputs.writer}:",
        fix=fix,
    )


def reset_enrichment(settings: Settings) -> list[str]:
    """Remove the live enrichment's output tables and checkpoint, so that its next start
    enriches silver.events from the first version; WriterBusyError while the stream runs.
    What was removed, by name."""
    outputs = EnrichmentOutputs.live()
    tables = (outputs.enriched, outputs.revenue, outputs.pins, outputs.progress)
    return reset_outputs(settings, outputs.writer, tables, [outputs.checkpoint(settings)])


def start_enrichment_query(
    spark: SparkSession,
    settings: Settings,
    available_now: bool,
    outputs: EnrichmentOutputs | None = None,
) -> StreamingQuery:
    """The query over the outputs' events (silver.events, or a replay version's), from their
    first version on a first start."""
    from lakehouse.core.delta_io import table_exists

    outputs = outputs or EnrichmentOutputs.live()
    events = outputs.events
    if not table_exists(spark, events, settings):
        first = "run the speed layer first (`make demo`, or the speed_layer DAG)"
        if outputs.name != "live":
            first = f"replay {outputs.name.removeprefix('replay_')} first (jobs.replay)"
        raise StorageError(f"no {events.name} at {events.path(settings)} yet: {first}")
    check_own_checkpoint(spark, settings, outputs)
    checkpoint = outputs.checkpoint(settings)
    writer = (
        appended_rows(spark, events, settings)
        .writeStream.queryName(
            "enrichment" if outputs.name == "live" else f"{outputs.name}_enrichment"
        )
        .foreachBatch(EnrichmentProcessor(settings, checkpoint, outputs))
        .option("checkpointLocation", checkpoint)
    )
    return started(writer, settings, available_now)


def run_enrichment(
    settings: Settings,
    stop_file: Path,
    available_now: bool,
    say: Callable[[str], None],
    outputs: EnrichmentOutputs | None = None,
) -> None:
    """Run the enrichment stream until asked to stop (or, `available_now`, until it has read
    what its events hold). Raises QueryFailedError when the query stops on an error."""
    outputs = outputs or EnrichmentOutputs.live()
    title = "enrichment stream" if outputs.name == "live" else f"{outputs.name} enrichment"
    run_stream(
        settings,
        outputs.writer,
        title,
        stop_file,
        lambda spark: start_enrichment_query(spark, settings, available_now, outputs),
        say,
    )
