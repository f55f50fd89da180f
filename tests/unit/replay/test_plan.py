"""Replay requests: which starts are accepted, and what a plan says about the log."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from lakehouse.replay.plan import (
    STARTUP_SECONDS,
    PartitionPlan,
    ReplayPlan,
    ReplayRequestError,
    ReplayStart,
    check_continuation,
    check_version_name,
    parse_offsets,
    records_done,
)

NOW = datetime(2026, 11, 26, 12, tzinfo=UTC)


def test_earliest_is_the_default_start() -> None:
    assert ReplayStart.parse("earliest", None, None, NOW) == ReplayStart("earliest")


def test_a_timestamp_start_keeps_its_moment() -> None:
    start = ReplayStart.parse("timestamp", NOW - timedelta(hours=1), None, NOW)
    assert start.timestamp == NOW - timedelta(hours=1)
    assert start.describe() == "timestamp 2026-11-26T11:00:00+00:00"


def test_an_offsets_start_reads_json() -> None:
    start = ReplayStart.parse("offsets", None, '{"0": 120, "2": 0}', NOW)
    assert start.offsets == {0: 120, 2: 0}


@pytest.mark.parametrize(
    ("kind", "timestamp", "offsets", "message"),
    [
        ("earliest", NOW, None, "neither a timestamp nor offsets"),
        ("earliest", None, '{"0": 1}', "neither a timestamp nor offsets"),
        ("timestamp", None, None, "needs a timestamp"),
        ("timestamp", NOW + timedelta(minutes=1), None, "in the future"),
        ("timestamp", NOW, '{"0": 1}', "needs a timestamp and no offsets"),
        ("offsets", None, None, "needs per-partition offsets"),
        ("offsets", NOW, '{"0": 1}', "no timestamp"),
        ("sideways", None, None, "unknown start"),
    ],
)
def test_conflicting_or_missing_options_are_refused(
    kind: str, timestamp: datetime | None, offsets: str | None, message: str
) -> None:
    with pytest.raises(ReplayRequestError, match=message):
        ReplayStart.parse(kind, timestamp, offsets, NOW)


@pytest.mark.parametrize(
    "timestamp",
    [datetime(1, 1, 1, tzinfo=UTC), datetime(1969, 12, 31, 23, 59, tzinfo=UTC)],
    ids=["year-1", "before-the-epoch"],
)
def test_a_timestamp_kafka_cannot_look_up_is_refused(timestamp: datetime) -> None:
    with pytest.raises(ReplayRequestError, match="outside the times Tributary handles"):
        ReplayStart.parse("timestamp", timestamp, None, NOW)


@pytest.mark.parametrize(
    "text",
    ["[1, 2]", "{", '{"a": 1}', '{"0": -1}', '"0"', '{"0": true}', '{"0": 1.5}', '{"0": "3"}'],
)
def test_offsets_must_be_a_json_object_of_non_negative_numbers(text: str) -> None:
    with pytest.raises(ReplayRequestError):
        parse_offsets(text)


@pytest.mark.parametrize("name", ["v1", "v12", "backfill_2026_11", "t0a1b2c3d"])
def test_simple_identifiers_are_version_names(name: str) -> None:
    assert check_version_name(name) == name


@pytest.mark.parametrize("name", ["V1", "1v", "v-1", "v 1", "", "live", "v" * 41, "../v1"])
def test_other_version_names_are_refused(name: str) -> None:
    with pytest.raises(ReplayRequestError, match="simple identifier"):
        check_version_name(name)


def plan() -> ReplayPlan:
    return ReplayPlan(
        "events",
        ReplayStart("earliest"),
        [
            PartitionPlan(0, start=10, end=110, requested=0, earliest=10),
            PartitionPlan(1, start=0, end=50, requested=0, earliest=0),
        ],
        forced=True,
        rate=50.0,
    )


def test_a_plan_counts_records_gaps_and_time() -> None:
    p = plan()
    assert p.records == 150 and p.gaps == {0: 10}
    assert p.estimated_seconds() == STARTUP_SECONDS + 3.0  # 150 records at 50/s
    assert f"about {STARTUP_SECONDS + 3:.0f} s: {STARTUP_SECONDS:.0f} s to start Spark" in (
        p.report()
    )
    assert json.loads(p.spark_starting_offsets()) == {"events": {"0": 10, "1": 0}}
    assert "10 already deleted by retention" in p.report()


def test_records_done_counts_what_the_query_reached_within_the_plan() -> None:
    p = plan()
    assert records_done(p, {}) == 0
    assert records_done(p, {0: 60, 1: 50}) == 100
    # Records appended after the plan was made do not count past 100%.
    assert records_done(p, {0: 500, 1: 70}) == 150


def test_a_continuation_takes_no_other_start_and_extends_a_valid_name() -> None:
    check_continuation("v1", {"--start": None, "--live": False})
    check_continuation(None, {"--version": None})  # scheduled
    with pytest.raises(ReplayRequestError, match=r"--extend .* takes no --start, --live$"):
        check_continuation("v1", {"--start": "earliest", "--version": None, "--live": True})
    with pytest.raises(ReplayRequestError, match=r"^--scheduled .* takes no --topic$"):
        check_continuation(None, {"--topic": "t"})
    with pytest.raises(ReplayRequestError, match="version"):
        check_continuation("no such/name", {})
