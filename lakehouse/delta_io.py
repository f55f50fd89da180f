"""Reading and writing: the Kafka source and Delta tables. Jobs never build paths themselves."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakehouse.config import Settings
from lakehouse.tables import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery


def read_kafka_stream(
    spark: SparkSession,
    settings: Settings,
    topic: str | None = None,
    starting_offsets: str = "earliest",
) -> DataFrame:
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", settings.kafka.bootstrap_servers)
        .option("subscribe", topic or settings.kafka.topic)
        .option("startingOffsets", starting_offsets)
        # A deleted or compacted offset must stop the job loudly, never skip data silently.
        .option("failOnDataLoss", "true")
        .load()
    )


def append_stream_available_now(
    df: DataFrame, table: Table, query: str, settings: Settings
) -> StreamingQuery:
    """Process everything available now into a Delta table, exactly once (checkpointed)."""
    return (
        df.writeStream.format("delta")
        .outputMode("append")
        .queryName(f"{table.name}.{query}")
        .option("checkpointLocation", table.checkpoint(query, settings))
        .trigger(availableNow=True)
        .start(table.path(settings))
    )


def read_table(spark: SparkSession, table: Table, settings: Settings) -> DataFrame:
    return spark.read.format("delta").load(table.path(settings))


def table_exists(spark: SparkSession, table: Table, settings: Settings) -> bool:
    from delta.tables import DeltaTable

    return bool(DeltaTable.isDeltaTable(spark, table.path(settings)))
