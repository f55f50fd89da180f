from __future__ import annotations

from lakehouse.core.frames import rows_frame
from lakehouse.transforms.dedup import drop_seen_events, first_delivery_per_event


def test_the_first_delivery_in_the_log_wins(spark) -> None:
    rows = [
        ("e1", 1, 7, "late copy"),
        ("e1", 0, 9, "first"),
        ("e1", 1, 3, "second"),
        ("e2", 2, 0, "only"),
    ]
    events = rows_frame(
        spark, rows, "event_id string, kafka_partition int, kafka_offset long, note string"
    )
    kept = {r["event_id"]: r["note"] for r in first_delivery_per_event(events).collect()}
    assert kept == {"e1": "first", "e2": "only"}


def test_events_already_seen_are_dropped(spark) -> None:
    events = rows_frame(spark, [("e1",), ("e2",), ("e3",)], "event_id string")
    seen = rows_frame(spark, [("e2", 1), ("e9", 2)], "event_id string, other int")
    assert sorted(r[0] for r in drop_seen_events(events, seen).collect()) == ["e1", "e3"]
