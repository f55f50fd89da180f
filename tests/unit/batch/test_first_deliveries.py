"""The batch layer's dedup: each event_id's first accepted delivery in bronze, wherever later
deliveries put the event."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from lakehouse.batch.first_deliveries import (
    BRONZE,
    FIRST_DELIVERIES,
    REDELIVERIES,
    first_by_arrival,
    first_deliveries_from,
    update_first_deliveries,
)
from lakehouse.core.delta_io import append_once, read_table
from lakehouse.core.frames import rows_frame
from lakehouse.transforms.bronze import to_raw_records
from tests.micro_batches import kafka_records

pytestmark = pytest.mark.slow  # make test-fast leaves it out (docs/testing.md)


def test_the_first_delivery_is_the_earliest_micro_batch_then_the_lowest_position(spark) -> None:
    def at(minute: int) -> datetime:
        return datetime(2026, 3, 1, 10, minute)  # as Spark gives it back: UTC, naive

    deliveries = rows_frame(
        spark,
        [("e1", 1, 5, at(2)), ("e1", 0, 9, at(1)), ("e1", 0, 3, at(3)), ("e2", 2, 7, at(2))],
        "event_id string, kafka_partition int, kafka_offset long, ingested_at timestamp",
    )
    firsts = first_by_arrival(deliveries).orderBy("event_id").collect()
    assert [tuple(r) for r in firsts] == [("e1", 0, 9, at(1)), ("e2", 2, 7, at(2))]


def event(event_id: str, at: datetime, page: str = "/") -> tuple[str, dict]:
    iso = at.isoformat().replace("+00:00", "Z")
    return "u1", {
        "event_id": event_id,
        "event_type": "click",
        "user_id": "u1",
        "page": page,
        "event_time": iso,
    }


def test_a_re_delivery_with_another_event_time_is_not_counted_where_it_says(
    spark, local_settings
) -> None:
    """A client re-sends e1 two hours later with a new event_time: the batch layer reads only
    the hours around the interval it recomputes, which the first delivery is not in, and must
    still count e1 once, where it first said."""
    hour = datetime(2026, 3, 1, 12, tzinfo=UTC)
    first = [event("e1", hour - timedelta(hours=3)), event("e0", hour - timedelta(hours=3))]
    append_once(
        kafka_records(spark, first, 0).transform(to_raw_records), BRONZE, local_settings, "t", 0
    )
    update_first_deliveries(spark, local_settings)
    again = [event("e1", hour + timedelta(minutes=10), "/other"), event("e2", hour)]
    append_once(
        kafka_records(spark, again, 2).transform(to_raw_records), BRONZE, local_settings, "t", 1
    )

    raw = read_table(spark, BRONZE, local_settings)
    events = first_deliveries_from(spark, local_settings, raw, hour, ["event_time"]).collect()

    assert [(r["event_id"], r["kafka_offset"]) for r in events] == [("e2", 3)]
    listed = read_table(spark, FIRST_DELIVERIES, local_settings).orderBy("event_id").collect()
    assert [(r["event_id"], r["kafka_offset"]) for r in listed] == [("e0", 1), ("e1", 0), ("e2", 3)]
    again = read_table(spark, REDELIVERIES, local_settings).collect()
    assert [(r["event_id"], r["kafka_offset"]) for r in again] == [("e1", 2)]


def test_first_deliveries_listed_without_redeliveries_or_over_a_rewritten_bronze_are_rebuilt(
    spark, local_settings
) -> None:
    """A release before batch.redeliveries listed the first deliveries alone: the next update
    lists both again from the start of bronze, so nothing is decided from half the story."""
    from lakehouse.core.delta_io import delete_folder

    at = datetime(2026, 3, 1, 12, tzinfo=UTC)
    sent = [event("e1", at), event("e1", at, "/other")]
    append_once(
        kafka_records(spark, sent, 0).transform(to_raw_records), BRONZE, local_settings, "t", 0
    )
    update_first_deliveries(spark, local_settings)
    delete_folder(spark, REDELIVERIES.path(local_settings))

    update_first_deliveries(spark, local_settings)

    again = read_table(spark, REDELIVERIES, local_settings).collect()
    assert [(r["event_id"], r["kafka_offset"]) for r in again] == [("e1", 1)]
    assert read_table(spark, FIRST_DELIVERIES, local_settings).count() == 1

    # Bronze read again from its start (its checkpoint lost): the first stays first.
    delete_folder(spark, FIRST_DELIVERIES.checkpoint(f"from-{BRONZE.name}", local_settings))
    update_first_deliveries(spark, local_settings)
    again = read_table(spark, REDELIVERIES, local_settings).collect()
    assert [(r["event_id"], r["kafka_offset"]) for r in again] == [("e1", 1)]

    # Bronze rewritten, not appended to (migrate-bronze rewrites it with its own rows): the
    # stream over it cannot go on, so both tables are listed again from its start.
    rows = read_table(spark, BRONZE, local_settings).localCheckpoint()
    rows.write.format("delta").mode("overwrite").save(BRONZE.path(local_settings))
    update_first_deliveries(spark, local_settings)
    again = read_table(spark, REDELIVERIES, local_settings).collect()
    assert [(r["event_id"], r["kafka_offset"]) for r in again] == [("e1", 1)]
    assert read_table(spark, FIRST_DELIVERIES, local_settings).count() == 1
