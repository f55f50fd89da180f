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


def kafka_records(spark, events: list[tuple[str, dict]], first_offset: int):
    import json

    return spark.createDataFrame(
        [
            (
                key.encode(),
                json.dumps(event).encode(),
                "events",
                0,
                first_offset + i,
                datetime.now(),
                0,
            )
            for i, (key, event) in enumerate(events)
        ],
        "key binary, value binary, topic string, partition int, offset long, "
        "timestamp timestamp, timestampType int",
    )


def test_the_state_a_batch_leaves_in_memory_is_what_the_next_batch_would_read_back(
    spark, local_settings, tmp_path
) -> None:
    from datetime import UTC, timedelta

    from lakehouse.generator import generate_events

    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "metadata").write_text('{"id":"query-1"}\n')
    out = SpeedOutputs.live()
    processor = MicroBatchProcessor(local_settings, out, str(checkpoint), lambda: {0: 130})
    events = list(
        generate_events(120, seed=5, start=datetime.now(UTC) - timedelta(minutes=30), users=4)
    )
    processor(kafka_records(spark, events[:60], 0), 0)
    processor(kafka_records(spark, events[60:], 60), 1)

    assert processor._committed is not None
    app, next_batch, remembered = processor._committed
    assert next_batch == 2
    read_back = MicroBatchProcessor(local_settings, out, str(checkpoint)).pinned_state(
        spark, app, next_batch
    )
    assert remembered == read_back
    assert read_back.offsets == {0: 120}
    assert read_back.waiting == 10
    assert read_back.silver_version == table_version(spark, out.silver, local_settings)
