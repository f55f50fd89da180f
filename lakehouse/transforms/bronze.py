"""Kafka records as the bronze layer keeps them: untouched payload plus coordinates."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

RAW_COLUMNS = ("key", "value", "topic", "partition", "offset", "kafka_timestamp", "ingested_at")


def to_raw_records(kafka: DataFrame) -> DataFrame:
    """Kafka source rows -> bronze rows. Works on streaming and static DataFrames alike."""
    return kafka.select(
        F.col("key").cast("string").alias("key"),
        F.col("value").cast("string").alias("value"),
        "topic",
        "partition",
        "offset",
        F.col("timestamp").alias("kafka_timestamp"),
        F.current_timestamp().alias("ingested_at"),
    )
