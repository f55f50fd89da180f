"""Streaming checkpoints: read what Spark keeps there (local disk or s3a alike)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def checkpoint_started(spark: SparkSession, checkpoint: str) -> bool:
    """Whether a query has started on the checkpoint: Spark writes `<checkpoint>/metadata`,
    with the query's id, on its first start."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(f"{checkpoint}/metadata")
    return bool(path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).exists(path))


def checkpoint_query_id(spark: SparkSession, checkpoint: str) -> str:
    """The id Spark gave the query on the checkpoint's first start (`<checkpoint>/metadata`).

    It survives restarts and changes only when the checkpoint is deleted, which is exactly the
    lifetime of the query's batch ids.
    """
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(f"{checkpoint}/metadata")
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    stream = fs.open(path)
    try:
        reader = jvm.java.io.BufferedReader(jvm.java.io.InputStreamReader(stream, "UTF-8"))
        first_line = reader.readLine()
    finally:
        stream.close()
    return str(json.loads(first_line)["id"])
