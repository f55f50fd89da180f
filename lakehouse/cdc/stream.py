"""The changelog stream: Debezium's topics into the CDC tables, run until asked to stop.

One Structured Streaming query reads every captured table's changelog topic and hands each
micro-batch to lakehouse.cdc.changelog. It stops as the speed layer does (lakehouse.speed.stream:
Ctrl-C, SIGTERM or a stop file lets the running batch commit first) and a restart continues
from its checkpoint.

A changelog topic is compacted: once the broker's cleaner has run, offsets of replaced values
are gone from it by design, so the query does not treat a gap in the offsets as lost data (a
reader from the start of a compacted topic meets them). Compaction never reaches what the
stream has yet to read while it keeps up: the connector's topics keep every record for
`min.compaction.lag.ms` (lakehouse.cdc.connector), and bronze.<table>_changes keeps every change
the stream read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from lakehouse.cdc.capture import ensure_changelog_topics
from lakehouse.cdc.changelog import PROGRESS, ChangelogProcessor
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import read_kafka_stream
from lakehouse.core.stream_outputs import check_own_outputs
from lakehouse.core.tables import CDC
from lakehouse.speed.stream import run_stream, started

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

QUERY_NAME = "cdc_changelog"


def changelog_checkpoint(settings: Settings) -> str:
    return f"{settings.storage.checkpoints}/{CDC}/{QUERY_NAME}"


def start_changelog_query(
    spark: SparkSession, settings: Settings, available_now: bool
) -> StreamingQuery:
    """The query from every captured table's topic, earliest first on a first start.
    OtherCheckpointError when the CDC tables hold another checkpoint's batches: a query there
    would read the topics from the start again and copy every change into bronze again."""
    checkpoint = changelog_checkpoint(settings)
    check_own_outputs(
        spark,
        settings,
        output=PROGRESS,
        progress=PROGRESS,
        checkpoint=checkpoint,
        app_prefix=f"{CDC}:",
        fix="put that checkpoint back (bronze.<table>_changes are a copy of the changelog "
        "topics no other checkpoint can continue)",
    )
    topics = ",".join(settings.cdc.topic(name) for name in settings.cdc.tables)
    stream = read_kafka_stream(
        spark,
        settings,
        topic=topics,
        max_offsets_per_trigger=settings.speed.max_offsets_per_trigger,
        fail_on_data_loss=False,
    )
    writer = (
        stream.writeStream.queryName(QUERY_NAME)
        .foreachBatch(ChangelogProcessor(settings, checkpoint))
        .option("checkpointLocation", checkpoint)
    )
    return started(writer, settings, available_now)


def run_changelog(
    settings: Settings, stop_file: Path, available_now: bool, say: Callable[[str], None]
) -> None:
    """Run the changelog stream until asked to stop (or, `available_now`, until it has read
    what the topics hold). Raises QueryFailedError when the query stops on an error."""
    # Debezium makes a table's topic only with its first change; the query needs them all.
    ensure_changelog_topics(settings)
    run_stream(
        settings,
        CDC,
        "changelog stream",
        stop_file,
        lambda spark: start_changelog_query(spark, settings, available_now),
        say,
    )
