"""A micro-batch's dedup against silver, on a tiny local Delta table."""

from __future__ import annotations

from datetime import datetime

from lakehouse.delta_io import append_once, table_version
from lakehouse.speed_batch import MicroBatchProcessor, PinnedState, SpeedOutputs

# Silver's columns that these tests read, and those its Delta statistics are kept for.
SCHEMA = (
    "event_id string, event_time timestamp, event_date date, kafka_partition int, "
    "kafka_offset long, kafka_timestamp timestamp, ingested_at timestamp"
)


def rows(spark, *events: tuple[str, str, int]):
    def row(eid: str, t: str, offset: int) -> tuple:
        at = datetime.fromisoformat(t)
        return (eid, at, at.date(), 0, offset, at, at)

    return spark.createDataFrame([row(*e) for e in events], SCHEMA)


def test_events_already_in_silver_are_dropped_at_the_edges_of_the_batch_time_range(
    spark, local_settings
) -> None:
    out = SpeedOutputs.live()
    # Two commits, two files: one before the batch's event times, one inside them.
    append_once(rows(spark, ("e1", "2026-03-01T10:00:00", 0)), out.silver, local_settings, "t", 0)
    append_once(rows(spark, ("e2", "2026-03-01T12:30:00", 1)), out.silver, local_settings, "t", 1)
    batch = rows(
        spark,
        ("e1", "2026-03-01T10:00:00", 7),  # seen, at the batch's first event time
        ("e2", "2026-03-01T12:30:00", 8),  # seen, at its last
        ("e3", "2026-03-01T11:00:00", 9),  # new
        ("e3", "2026-03-01T11:00:00", 10),  # a second delivery in the same batch
    )
    processor = MicroBatchProcessor(local_settings, out, "unused")
    pinned = PinnedState(silver_version=table_version(spark, out.silver, local_settings))
    new = processor.new_events(spark, batch, pinned).collect()
    assert [(r["event_id"], r["kafka_offset"]) for r in new] == [("e3", 9)]


def test_a_batch_outside_silver_s_time_range_keeps_all_its_events(spark, local_settings) -> None:
    out = SpeedOutputs.live()
    append_once(rows(spark, ("e1", "2026-03-01T10:00:00", 0)), out.silver, local_settings, "t", 0)
    batch = rows(spark, ("e2", "2026-03-02T10:00:00", 1))
    processor = MicroBatchProcessor(local_settings, out, "unused")
    new = processor.new_events(spark, batch, PinnedState(silver_version=0)).collect()
    assert [r["event_id"] for r in new] == ["e2"]
