"""The enrichment stream: silver.events, as the speed layer appends it, joined as of event
time with the shop's history tables (lakehouse.joins.enrichment), run until asked to stop.

It reads silver.events as a Delta stream (the rows each commit adds; a commit that rewrites
rows fails the query rather than be skipped) and stops as the speed layer does: Ctrl-C,
SIGTERM or a stop file lets the running batch commit first, and a restart continues from its
checkpoint.

Its output tables belong to one checkpoint: a query on another (the checkpoint deleted or
moved) is refused until they are reset (`reset_enrichment`), since it would read the events
from their first version again and its batch ids, which its rows are keyed by, start over.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from lakehouse.core.checkpoints import checkpoint_query_id, checkpoint_started
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import appended_rows
from lakehouse.core.locks import exclusive_writer
from lakehouse.core.small_tables import column_values
from lakehouse.core.storage import StorageError
from lakehouse.joins.enrichment import EnrichmentProcessor
from lakehouse.joins.outputs import EnrichmentOutputs
from lakehouse.speed.stream import run_stream, started

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery


def enrichment_checkpoint(settings: Settings) -> str:
    return EnrichmentOutputs.live().checkpoint(settings)


class OtherCheckpointError(StorageError):
    """The outputs hold what a query on another checkpoint wrote; the message says what to do."""


def check_own_outputs(spark: SparkSession, settings: Settings, outputs: EnrichmentOutputs) -> None:
    """OtherCheckpointError unless every batch the outputs' progress records was written by
    the query of the outputs' checkpoint (or none was)."""
    written = column_values(settings, outputs.progress, "app_id")
    checkpoint = outputs.checkpoint(settings)
    if checkpoint_started(spark, checkpoint):
        written.discard(f"{outputs.writer}:{checkpoint_query_id(spark, checkpoint)}")
    if not written:
        return
    if outputs.name == "live":
        fix = (
            "put that checkpoint back, or start afresh with `python -m jobs.enrich --reset` "
            "(it removes the enrichment's tables and checkpoint; the stream then enriches all "
            "of silver.events again)"
        )
    else:
        version = outputs.name.removeprefix("replay_")
        fix = f"remove the version (`python -m jobs.versions remove {version}`) and replay it"
    raise OtherCheckpointError(
        f"{outputs.enriched.name} holds what another checkpoint's query wrote "
        f"({', '.join(sorted(written))}), and {checkpoint} is not its checkpoint: a query "
        f"there would enrich every event again and count its revenue twice; {fix}"
    )


def reset_enrichment(settings: Settings) -> list[str]:
    """Remove the live enrichment's output tables and checkpoint, so that its next start
    enriches silver.events from the first version; WriterBusyError while the stream runs.
    What was removed, by name."""
    from lakehouse.core.delta_io import delete_folder, table_exists
    from lakehouse.core.spark import get_spark_checked

    outputs = EnrichmentOutputs.live()
    with exclusive_writer(settings, outputs.writer):
        spark = get_spark_checked("enrich-reset", settings)
        removed = []
        for target in (outputs.enriched, outputs.revenue, outputs.pins, outputs.progress):
            if table_exists(spark, target, settings):
                delete_folder(spark, target.path(settings))
                removed.append(target.name)
        checkpoint = outputs.checkpoint(settings)
        if checkpoint_started(spark, checkpoint):
            removed.append(f"the checkpoint {checkpoint}")
        delete_folder(spark, checkpoint)
        return removed


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
    check_own_outputs(spark, settings, outputs)
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
