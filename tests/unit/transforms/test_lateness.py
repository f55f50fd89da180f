from __future__ import annotations

from datetime import UTC, datetime

from lakehouse.core.frames import rows_frame
from lakehouse.transforms.lateness import (
    PartitionMarks,
    WatermarkRule,
    advance_watermark,
    late_events,
    marks_of_arrays,
    next_watermark,
    on_time_events,
    partition_marks,
)

MICROS = 1_000_000


def micros(text: str) -> int:
    return int(datetime.fromisoformat(f"2026-03-01T{text}+00:00").timestamp() * MICROS)


def test_events_before_the_watermark_are_late_and_the_rest_on_time(spark) -> None:
    df = rows_frame(
        spark,
        [(datetime(2026, 3, 1, 9, 59, 59, tzinfo=UTC),), (datetime(2026, 3, 1, 10, tzinfo=UTC),)],
        "event_time timestamp",
    )
    wm = micros("10:00:00")
    assert late_events(df, wm).count() == 1
    assert on_time_events(df, wm).count() == 1, "an event exactly at the watermark is on time"


def test_before_any_watermark_nothing_is_late(spark) -> None:
    df = rows_frame(spark, [(datetime(2000, 1, 1, tzinfo=UTC),)], "event_time timestamp")
    assert late_events(df, None).count() == 0 and on_time_events(df, None).count() == 1


def test_the_watermark_trails_the_newest_event_and_never_moves_back() -> None:
    first = advance_watermark(None, micros("10:10:00"), allowed_lateness_seconds=600)
    assert first == micros("10:00:00")
    assert advance_watermark(first, micros("10:05:00"), 600) == first
    assert advance_watermark(first, None, 600) == first
    assert advance_watermark(first, micros("10:20:00"), 600) == micros("10:10:00")


RULE = WatermarkRule(allowed_lateness_seconds=600, support_events=3, idle_partition_seconds=60)


def marks(events: dict[int, list[str]], arrivals: dict[int, str]) -> PartitionMarks:
    return PartitionMarks(
        {p: sorted((micros(t) for t in times), reverse=True) for p, times in events.items()},
        {p: micros(t) for p, t in arrivals.items()},
    )


def test_one_event_far_ahead_of_its_partition_does_not_move_the_watermark() -> None:
    steady = marks({0: ["10:00:00", "10:00:01", "10:00:02"]}, {0: "10:00:02"})
    ahead = marks({0: ["12:00:00"]}, {0: "10:00:03"})
    merged = steady.merged(ahead, keep=3)
    assert merged.events[0] == [micros(t) for t in ("12:00:00", "10:00:02", "10:00:01")]
    assert next_watermark(None, merged, RULE) == micros("09:50:01")
    # Once as many events as the rule asks for have reached it, the time is supported.
    two_more = marks({0: ["12:00:01", "12:00:02"]}, {0: "10:00:04"})
    assert next_watermark(None, merged.merged(two_more, 3), RULE) == micros("11:50:00")


def test_the_watermark_is_held_by_the_partition_furthest_behind() -> None:
    both = marks(
        {0: ["10:00:00", "10:00:01", "10:00:02"], 1: ["08:00:00", "08:00:01", "08:00:02"]},
        {0: "10:00:02", 1: "10:00:01"},
    )
    assert next_watermark(None, both, RULE) == micros("07:50:00")
    assert next_watermark(micros("09:00:00"), both, RULE) == micros("09:00:00"), "never back"


def test_an_idle_partition_or_one_with_too_few_events_does_not_hold_it_back() -> None:
    idle = marks(
        {0: ["10:00:00", "10:00:01", "10:00:02"], 1: ["08:00:00", "08:00:01", "08:00:02"]},
        {0: "10:05:00", 1: "10:03:59"},  # partition 1's newest record: 61 s before 0's
    )
    assert next_watermark(None, idle, RULE) == micros("09:50:00")
    young = marks({0: ["10:00:00", "10:00:01", "10:00:02"], 1: ["08:00:00"]}, {0: "10:00:02"})
    assert next_watermark(None, young, RULE) == micros("09:50:00")
    assert next_watermark(None, marks({0: ["10:00:00"]}, {0: "10:00:00"}), RULE) is None


def test_marks_keep_each_partition_s_newest_counted_events_and_newest_arrival(spark) -> None:
    from pyspark.sql import functions as F

    def row(partition: int, event: str, arrived: str) -> tuple:
        return (
            partition,
            datetime.fromisoformat(f"2026-03-01T{event}+00:00"),
            datetime.fromisoformat(f"2026-03-01T{arrived}+00:00"),
        )

    events = rows_frame(
        spark,
        [
            row(0, "10:00:00", "10:00:00"),
            row(0, "10:00:05", "10:00:06"),
            row(0, "10:00:03", "10:00:07"),
            row(0, "09:00:00", "10:00:09"),  # not counted (late), but it arrived
            row(1, "10:00:01", "10:00:02"),
        ],
        "kafka_partition int, event_time timestamp, kafka_timestamp timestamp",
    )
    counted = F.col("event_time") >= F.lit(datetime(2026, 3, 1, 9, 30, tzinfo=UTC))
    got = partition_marks(events, keep=2, counted=counted)
    assert got.events == {0: [micros("10:00:05"), micros("10:00:03")], 1: [micros("10:00:01")]}
    assert got.arrivals == {0: micros("10:00:09"), 1: micros("10:00:02")}

    # The same marks from the events collected to the driver, as a micro-batch takes them.
    on_driver = events.select(
        "kafka_partition",
        F.unix_micros("event_time").alias("t"),
        F.unix_micros("kafka_timestamp").alias("at"),
        counted.alias("counted"),
    ).toPandas()
    arrays = [on_driver[c].to_numpy() for c in ("kafka_partition", "t", "at", "counted")]
    assert marks_of_arrays(*arrays, keep=2) == got


def test_marks_of_arrays_keep_ties_and_leave_out_a_partition_with_nothing_counted() -> None:
    import numpy as np

    partitions = np.array([3, 3, 3, 3, 5])
    times = np.array(
        [micros(t) for t in ("10:00:01", "10:00:02", "10:00:02", "10:00:00", "10:00:09")]
    )
    arrivals = np.array([micros("10:01:00")] * 4 + [micros("10:02:00")])
    counted = np.array([True, True, True, True, False])
    got = marks_of_arrays(partitions, times, arrivals, counted, keep=3)
    assert got.events == {3: [micros("10:00:02"), micros("10:00:02"), micros("10:00:01")]}
    assert got.arrivals == {3: micros("10:01:00"), 5: micros("10:02:00")}
