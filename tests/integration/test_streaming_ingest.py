"""A Spark Structured Streaming query from the real Kafka broker into Delta, and the demo job.

Exactly-once is checked the way users meet it: run the query again (a restart) and nothing
is added twice; produce more and exactly the new records arrive.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from lakehouse.core.config import Settings
from lakehouse.core.delta_io import append_stream_available_now, read_kafka_stream, read_table
from lakehouse.core.kafka_io import ensure_topic, produce_json
from lakehouse.core.tables import Table, table
from lakehouse.generator.clickstream import generate_events
from lakehouse.transforms.bronze import RAW_COLUMNS, to_raw_records

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

START = datetime(2026, 1, 1, tzinfo=UTC)
INGEST = Table(
    "tests.kafka_ingest",
    writer="tests",
    description="a plain Kafka -> Delta query",
    schema=table("bronze.events_raw").schema,
)


def ingest(spark: SparkSession, settings: Settings, topic: str) -> int:
    raw = INGEST
    stream = read_kafka_stream(spark, settings, topic=topic).transform(to_raw_records)
    append_stream_available_now(stream, raw, "ingest", settings).awaitTermination()
    return read_table(spark, raw, settings).count()


def test_stream_from_kafka_into_delta_exactly_once(
    spark: SparkSession, kafka_up: str, local_settings: Settings, topic_name: str
) -> None:
    from pyspark.sql import functions as F

    ensure_topic(local_settings, topic_name, partitions=3)
    first = list(generate_events(400, seed=3, start=START))
    produce_json(local_settings, first, topic=topic_name)

    assert ingest(spark, local_settings, topic_name) == 400
    assert ingest(spark, local_settings, topic_name) == 400, "a rerun must not add anything"

    produce_json(local_settings, generate_events(150, seed=4, start=START), topic=topic_name)
    assert ingest(spark, local_settings, topic_name) == 550

    rows = read_table(spark, INGEST, local_settings)
    assert tuple(rows.columns) == RAW_COLUMNS
    # Every Kafka offset exactly once, per partition, with no gap.
    per_partition = (
        rows.groupBy("partition")
        .agg(
            F.count("*").alias("n"),
            F.countDistinct("offset").alias("distinct"),
            F.min("offset").alias("low"),
            F.max("offset").alias("high"),
        )
        .collect()
    )
    assert sum(r["n"] for r in per_partition) == 550
    for r in per_partition:
        assert r["n"] == r["distinct"] == r["high"] - r["low"] + 1 and r["low"] == 0
    # The payload is the producer's JSON, untouched.
    ids = {
        r["id"]
        for r in rows.select(
            F.get_json_object(F.col("value").cast("string"), "$.event_id").alias("id")
        ).collect()
    }
    assert {e["event_id"] for _, e in first} <= ids


def test_demo_job_end_to_end_on_minio(
    spark: SparkSession, kafka_up: str, minio_up: str, minio_settings: Settings, topic_name: str
) -> None:
    """`make demo`'s steps against the lakehouse on MinIO: produce with anomalies, run the
    speed layer to the end of the log, and the accounting balances; the shop's change
    followed into silver, and every accepted event enriched and judged. (In kappa mode: the
    batch layer's hour is the batch layer's tests' to prove.)"""
    from lakehouse.ops.demo import run_demo

    settings = minio_settings.model_copy(
        update={
            "kafka": minio_settings.kafka.model_copy(update={"topic": topic_name}),
            "mode": "kappa",
        }
    )
    said: list[str] = []
    report = run_demo(settings, 400, seed=5, say=said.append)
    assert said[0] == f"==> producing 400 events (seed 5) to {topic_name!r}", said
    assert report.caught_up.startswith("ran the speed layer")
    counts = report.accounting
    assert counts.balanced, counts
    assert counts.consumed == 400
    assert counts.quarantined > 0 and counts.duplicates > 0
    assert counts.late > 0, "read in several micro-batches: some events are set aside as late"
    assert report.reasons and report.newest_windows and report.seam is None
    assert report.cdc is not None and report.cdc.failed is None, report.cdc
    # The update's own change reached the tables: the row shown is the one it set.
    current = report.cdc.current
    assert current is not None and f"segment = '{current['segment']}'" in report.cdc.update, (
        report.cdc
    )
    assert report.cdc.history[-1]["segment"] == current["segment"], report.cdc.history
    # Every accepted event joined with the user valid at its time, and judged equal.
    joins = report.joins
    assert joins is not None and joins.failed is None, joins
    users = {status: n for dimension, status, n in joins.matches if dimension == "user"}
    assert sum(users.values()) == counts.silver, joins.matches
    assert users.get("matched", 0) > 0, joins.matches
    assert joins.revenue and joins.verdict.endswith("equal their recompute"), joins
