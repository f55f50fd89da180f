"""Micro-batches as the speed layer's foreachBatch receives them, built in code: Kafka
records and the checkpoint folder the processor reads its query id from."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from lakehouse.core.frames import rows_frame


def query_checkpoint(folder: Path, query_id: str) -> Path:
    """A streaming checkpoint folder holding only its query id: all the processor reads."""
    folder.mkdir(parents=True)
    (folder / "metadata").write_text(json.dumps({"id": query_id}) + "\n")
    return folder


def batch_of_another_query(spark, settings, progress, app_id: str) -> None:
    """A progress row of batch 0 of `app_id`, as a query on another checkpoint leaves it in a
    stream's `progress` table (lakehouse.core.stream_outputs)."""
    from lakehouse.core.delta_io import append_new

    frame = rows_frame(spark, [{"app_id": app_id, "batch_id": 0}], progress.spark_schema())
    append_new(frame, progress, settings)


def kafka_records(spark, events: list[tuple[str, dict]], first_offset: int):
    """(key, event) pairs as records of partition 0 of the `events` topic, from `first_offset`."""
    return raw_kafka_records(
        spark, [(key.encode(), json.dumps(event).encode()) for key, event in events], first_offset
    )


def raw_kafka_records(spark, records: list[tuple[bytes, bytes]], first_offset: int):
    """(key, value) bytes as records of partition 0 of the `events` topic, from `first_offset`."""
    return rows_frame(
        spark,
        [
            (key, value, "events", 0, first_offset + i, datetime.now(), 0)
            for i, (key, value) in enumerate(records)
        ],
        "key binary, value binary, topic string, partition int, offset long, "
        "timestamp timestamp, timestampType int",
    )
