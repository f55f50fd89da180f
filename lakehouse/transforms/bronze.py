"""Kafka records as the bronze layer keeps them: untouched payload plus coordinates.

`key` and `value` stay the bytes the producer sent (BINARY): bronze is the master dataset,
and a record that is not UTF-8 text must be kept as it came, and stay readable by any Delta
reader (a string column holding invalid UTF-8 is not). Decoding is parsing's job
(lakehouse.transforms.parse)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

RAW_COLUMNS = ("key", "value", "topic", "partition", "offset", "kafka_timestamp", "ingested_at")


def to_raw_records(kafka: DataFrame) -> DataFrame:
    """Kafka source rows -> bronze rows. Works on streaming and static DataFrames alike."""
    return kafka.select(
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        F.col("timestamp").alias("kafka_timestamp"),
        F.current_timestamp().alias("ingested_at"),
    )
