"""The commerce stream: the order-events and payments topics into the commerce tables, run
until asked to stop.

One Structured Streaming query reads both topics and hands each micro-batch to
lakehouse.commerce.processor, into the live tables (jobs.commerce) or a replay's own
(lakehouse.commerce.rebuild). It stops as the speed layer does (lakehouse.speed.stream: Ctrl-C,
SIGTERM or the stop file lets the running batch commit first) and a restart continues from its
checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from lakehouse.commerce.outputs import CommerceOutputs
from lakehouse.commerce.processor import CommerceProcessor
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import read_kafka_stream
from lakehouse.core.kafka_io import ensure_topic
from lakehouse.core.stream_outputs import check_own_outputs, replay_again
from lakehouse.speed.stream import run_stream, started

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery


def commerce_topics(settings: Settings) -> tuple[str, str]:
    return settings.kafka.order_events_topic, settings.kafka.payments_topic


def ensure_commerce_topics(settings: Settings) -> None:
    """Both topics, so the query can subscribe before a producer has sent anything."""
    for topic in commerce_topics(settings):
        ensure_topic(settings, topic)


def start_commerce_query(
    spark: SparkSession, settings: Settings, outputs: CommerceOutputs, available_now: bool
) -> StreamingQuery:
    """The query from both topics into `outputs`, from the earliest offsets on a first start
    (afterwards the checkpoint knows where it is), at most speed.max_offsets_per_trigger
    records a batch. OtherCheckpointError when the outputs hold another checkpoint's batches:
    a query there would copy every record of the topics into bronze again."""
    checkpoint = outputs.checkpoint(settings)
    if outputs.raw is None:
        fix = replay_again(outputs.name.removeprefix("replay_").removesuffix("_commerce"))
    else:
        fix = (
            "put that checkpoint back (the live tables are a copy of the topics no other "
            "checkpoint can continue); a replay version's commerce stream "
            "(`python -m jobs.replay_joins`) folds the topics again into tables of its own"
        )
    check_own_outputs(
        spark,
        settings,
        output=outputs.raw or outputs.order_events,
        progress=outputs.progress,
        checkpoint=checkpoint,
        app_prefix=f"{outputs.name}:",
        fix=fix,
    )
    stream = read_kafka_stream(
        spark,
        settings,
        topic=",".join(commerce_topics(settings)),
        max_offsets_per_trigger=settings.speed.max_offsets_per_trigger,
    )
    writer = (
        stream.writeStream.queryName(outputs.name)
        .foreachBatch(CommerceProcessor(settings, outputs, checkpoint))
        .option("checkpointLocation", checkpoint)
    )
    return started(writer, settings, available_now)


def run_commerce(
    settings: Settings, stop_file: Path, available_now: bool, say: Callable[[str], None]
) -> None:
    """Run the live commerce stream until asked to stop (or, `available_now`, until it has
    read what the topics hold). Raises QueryFailedError when the query stops on an error."""
    ensure_commerce_topics(settings)
    outputs = CommerceOutputs.live()
    run_stream(
        settings,
        outputs.lock,
        "commerce stream",
        stop_file,
        lambda spark: start_commerce_query(spark, settings, outputs, available_now),
        say,
    )
