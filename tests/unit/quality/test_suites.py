"""Each suite catches the defect it is written for, with the right action; clean tables pass.

Every table is built in code to contain exactly one defect (or none).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from lakehouse.core.frames import rows_frame
from lakehouse.quality.suites import (
    Action,
    Check,
    EventTimeBounds,
    Suite,
    active_users_suite,
    bronze_events_raw_suite,
    quarantine_suite,
    silver_events_suite,
    suite_for,
    user_sessions_suite,
)
from lakehouse.quality.validate import (
    DataQualityError,
    SuiteResult,
    Verdict,
    kept_rows,
    quarantine_rows,
    validate_dataframe,
)

pytestmark = pytest.mark.slow  # make test-fast leaves it out (docs/testing.md)

T = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
BOUNDS = EventTimeBounds(T - timedelta(days=1), T + timedelta(hours=1))

RAW = (
    "key binary, value binary, topic string, partition int, offset long, "
    "kafka_timestamp timestamp, ingested_at timestamp"
)
SILVER = (
    "event_id string, event_type string, user_id string, session_id string, page string, "
    "product_id string, amount decimal(18,2), event_time timestamp, sent_at timestamp, "
    "event_date date, kafka_partition int, kafka_offset long, kafka_timestamp timestamp, "
    "ingested_at timestamp, arrived_late boolean"
)
QUARANTINE = (
    "topic string, kafka_partition int, kafka_offset long, kafka_timestamp timestamp, "
    "key binary, value binary, value_bytes int, reasons array<string>, reason string, "
    "quarantined_at timestamp"
)
COUNTS = (
    "window_start timestamp, window_end timestamp, event_type string, events long, "
    "amount_sum decimal(18,2)"
)
ACTIVE = (
    "window_start timestamp, window_end timestamp, page string, users array<string>, "
    "active_users int, events long"
)
SESSIONS = (
    "user_id string, session_start timestamp, session_end timestamp, events long, "
    "revenue decimal(18,2), duration_seconds long"
)


def raw(offset: int = 0, key: bytes | None = b"u1") -> tuple[Any, ...]:
    return (key, b"{}", "events", 0, offset, T, T)


def silver(n: int = 0, **changes: Any) -> tuple[Any, ...]:
    row: dict[str, Any] = {
        "event_id": f"e-{n}",
        "event_type": "purchase" if n % 2 else "click",
        "user_id": "u1",
        "session_id": "s1",
        "page": "/",
        "product_id": "p1",
        "amount": Decimal("9.99") if n % 2 else None,
        "event_time": T + n * MINUTE,
        "sent_at": T + n * MINUTE + timedelta(seconds=1),
        "event_date": T.date(),
        "kafka_partition": 0,
        "kafka_offset": n,
        "kafka_timestamp": T + n * MINUTE,
        "ingested_at": T + n * MINUTE,
        "arrived_late": False,
    }
    row.update(changes)
    return tuple(row.values())


def quarantined(offset: int = 0, reasons: list[str] | None = None, **changes: Any) -> tuple:
    reasons = ["malformed_json"] if reasons is None else reasons
    row: dict[str, Any] = {
        "topic": "events",
        "kafka_partition": 0,
        "kafka_offset": offset,
        "kafka_timestamp": T,
        "key": b"u1",
        "value": b"\xffgarbage",  # not UTF-8: bronze keeps the bytes received
        "value_bytes": 8,
        "reasons": reasons,
        "reason": "; ".join(reasons),
        "quarantined_at": T,
    }
    row.update(changes)
    return tuple(row.values())


def count_row(start: datetime = T, length: timedelta = MINUTE, events: int = 2) -> tuple:
    return (start, start + length, "click", events, Decimal("0.00"))


def active_row(start: datetime = T, length: timedelta = 10 * MINUTE, **changes: Any) -> tuple:
    row: dict[str, Any] = {
        "window_start": start,
        "window_end": start + length,
        "page": "/",
        "users": ["u1", "u2"],
        "active_users": 2,
        "events": 3,
    }
    row.update(changes)
    return tuple(row.values())


def session_row(start: datetime = T, end: datetime | None = None, **changes: Any) -> tuple:
    end = start + 5 * MINUTE if end is None else end
    row: dict[str, Any] = {
        "user_id": "u1",
        "session_start": start,
        "session_end": end,
        "events": 4,
        "revenue": Decimal("9.99"),
        "duration_seconds": int((end - start).total_seconds()),
    }
    row.update(changes)
    return tuple(row.values())


def validate(df, suite: Suite, **kwargs: Any) -> SuiteResult:
    """Without examples unless asked (their second validation proves nothing new for a test
    that does not read them); the DataFrame cached, as GX runs several Spark jobs on it."""
    return validate_dataframe(df, suite, **{"cache": True, "examples": 0, **kwargs})


def run(spark, suite: Suite | str, schema: str, *rows: tuple, **kwargs: Any) -> SuiteResult:
    """Validate `rows` with `suite`, or with the suite of the table it names (parameters name
    suites: they are built as a test runs, not as every test worker collects this module)."""
    chosen = suite_for(suite, BOUNDS) if isinstance(suite, str) else suite
    return validate(rows_frame(spark, list(rows), schema), chosen, **kwargs)


def broken(result: SuiteResult) -> dict[str, tuple[Action, int | None]]:
    return {c.check: (c.action, c.unexpected_count) for c in result.broken()}


# --- clean tables pass ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("suite", "schema", "rows"),
    [
        ("bronze.events_raw", RAW, [raw(0), raw(1)]),
        ("silver.events", SILVER, [silver(0), silver(1)]),
        ("bronze.quarantine", QUARANTINE, [quarantined(0), quarantined(1, ["a", "b"])]),
        ("speed.event_counts_1m", COUNTS, [count_row(T), count_row(T + MINUTE)]),
        ("speed.active_users_10m", ACTIVE, [active_row(T), active_row(T + MINUTE)]),
        ("speed.user_sessions", SESSIONS, [session_row(T), session_row(T + 60 * MINUTE)]),
    ],
    ids=["events_raw", "silver", "quarantine", "counts", "active_users", "sessions"],
)
def test_a_clean_table_passes(spark, suite, schema, rows) -> None:
    result = run(spark, suite, schema, *rows)
    assert broken(result) == {}
    assert result.verdict is Verdict.PASSED
    result.raise_if_failed()


# --- silver.events --------------------------------------------------------------------------


def test_a_null_key_is_routed_to_quarantine_and_the_rest_kept(spark) -> None:
    df = rows_frame(spark, [silver(0), silver(1, user_id=None), silver(2)], SILVER)
    result = validate(df, silver_events_suite(BOUNDS))
    assert broken(result) == {"user_id_not_null": (Action.QUARANTINE, 1)}
    assert result.verdict is Verdict.WARNED, "routing rows away does not fail the run"
    [row] = quarantine_rows(df, result).collect()
    assert (row["event_id"], row["reasons"], row["reason"]) == (
        "e-1",
        ["dq:user_id_not_null"],
        "dq:user_id_not_null",
    )
    assert sorted(r["event_id"] for r in kept_rows(df, result).collect()) == ["e-0", "e-2"]


def test_a_duplicate_event_id_fails_the_run(spark) -> None:
    result = run(
        spark, silver_events_suite(BOUNDS), SILVER, silver(0), silver(1, event_id="e-0"), examples=5
    )
    assert broken(result) == {"event_id_unique": (Action.FAIL, 2)}
    assert result.verdict is Verdict.FAILED
    assert result.check_result("event_id_unique").examples == ("e-0", "e-0")
    with pytest.raises(DataQualityError, match="event_id_unique"):
        result.raise_if_failed()


def test_a_negative_purchase_amount_is_quarantined(spark) -> None:
    df = rows_frame(spark, [silver(0), silver(1, amount=Decimal("-5.00"))], SILVER)
    result = validate(df, silver_events_suite(BOUNDS), examples=5)
    assert broken(result) == {"amount_not_negative": (Action.QUARANTINE, 1)}
    assert result.check_result("amount_not_negative").examples == (Decimal("-5.00"),)
    assert [r["reason"] for r in quarantine_rows(df, result).collect()] == [
        "dq:amount_not_negative"
    ]


def test_a_purchase_without_amount_is_quarantined_other_types_need_none(spark) -> None:
    df = rows_frame(spark, [silver(0), silver(1, amount=None)], SILVER)
    result = validate(df, silver_events_suite(BOUNDS))
    assert broken(result) == {"purchase_amount_not_null": (Action.QUARANTINE, 1)}
    assert [r["event_id"] for r in quarantine_rows(df, result).collect()] == ["e-1"]


@pytest.mark.parametrize("offset", [timedelta(days=-2), timedelta(hours=2)], ids=["early", "late"])
def test_an_out_of_bounds_event_time_is_quarantined(spark, offset) -> None:
    df = rows_frame(spark, [silver(0), silver(1, event_time=T + offset)], SILVER)
    result = validate(df, silver_events_suite(BOUNDS))
    assert broken(result)["event_time_within_bounds"] == (Action.QUARANTINE, 1)
    [row] = quarantine_rows(df, result).collect()
    assert row["event_id"] == "e-1"
    assert "dq:event_time_within_bounds" in row["reasons"]


def test_a_row_breaking_two_rules_is_routed_once_with_both_reasons(spark) -> None:
    bad = silver(1, user_id=None, amount=Decimal("-1.00"))
    df = rows_frame(spark, [silver(0), bad], SILVER)
    result = validate(df, silver_events_suite(BOUNDS))
    [row] = quarantine_rows(df, result).collect()
    assert row["reason"] == "dq:user_id_not_null; dq:amount_not_negative"


def test_an_unknown_event_type_is_quarantined_and_a_wrong_type_fails(spark) -> None:
    result = run(spark, silver_events_suite(BOUNDS), SILVER, silver(0, event_type="refund"))
    assert broken(result) == {"event_type_known": (Action.QUARANTINE, 1)}
    wrong = SILVER.replace("kafka_offset long", "kafka_offset string")
    result = run(spark, silver_events_suite(BOUNDS), wrong, silver(0, kafka_offset="0"))
    assert broken(result) == {"kafka_offset_is_long": (Action.FAIL, None)}


def test_a_producer_clock_behind_event_time_only_warns(spark) -> None:
    early = silver(0, sent_at=T - timedelta(hours=1))
    result = run(spark, silver_events_suite(BOUNDS), SILVER, early)
    assert broken(result) == {"sent_after_event_time": (Action.WARN, 1)}
    assert result.verdict is Verdict.WARNED
    assert quarantine_rows(rows_frame(spark, [early], SILVER), result).count() == 0


# --- bronze ---------------------------------------------------------------------------------


def test_duplicate_kafka_coordinates_in_bronze_fail_the_run(spark) -> None:
    result = run(spark, bronze_events_raw_suite(), RAW, raw(0), raw(1), raw(1))
    assert broken(result) == {"topic_partition_offset_unique": (Action.FAIL, 2)}
    assert result.verdict is Verdict.FAILED


def test_a_bronze_record_without_key_only_warns(spark) -> None:
    result = run(spark, bronze_events_raw_suite(), RAW, raw(0), raw(1, key=None))
    assert broken(result) == {"key_not_null": (Action.WARN, 1)}
    assert result.verdict is Verdict.WARNED


@pytest.mark.parametrize(
    ("row", "check"),
    [
        (quarantined(1, reasons=[], reason=""), "reason_not_empty"),
        (quarantined(1, reasons=None, reason=None), "reason_not_null"),
    ],
    ids=["empty", "null"],
)
def test_a_quarantine_row_without_reason_fails_the_run(spark, row, check) -> None:
    result = run(spark, quarantine_suite(), QUARANTINE, quarantined(0), row)
    assert check in broken(result)
    assert {c.action for c in result.broken()} == {Action.FAIL}
    assert result.verdict is Verdict.FAILED


# --- views ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("suite", "schema", "rows", "check"),
    [
        (
            "speed.event_counts_1m",
            COUNTS,
            [count_row(), count_row()],
            "window_start_event_type_unique",
        ),
        (
            "speed.active_users_10m",
            ACTIVE,
            [active_row(), active_row()],
            "window_start_page_unique",
        ),
        (
            "speed.user_sessions",
            SESSIONS,
            [session_row(), session_row(end=T + MINUTE)],
            "user_id_session_start_unique",
        ),
    ],
    ids=["counts", "active_users", "sessions"],
)
def test_a_duplicate_view_key_fails_the_run(spark, suite, schema, rows, check) -> None:
    result = run(spark, suite, schema, *rows)
    assert broken(result) == {check: (Action.FAIL, 2)}


@pytest.mark.parametrize(
    ("suite", "schema", "row", "checks"),
    [
        (
            "speed.event_counts_1m",
            COUNTS,
            count_row(length=2 * MINUTE),
            {"window_bounds_consistent"},
        ),
        (
            "speed.event_counts_1m",
            COUNTS,
            count_row(start=T + timedelta(seconds=30)),
            {"window_bounds_consistent"},
        ),
        (
            "speed.active_users_10m",
            ACTIVE,
            active_row(length=MINUTE),
            {"window_bounds_consistent"},
        ),
        (
            "speed.user_sessions",
            SESSIONS,
            session_row(end=T - MINUTE),
            {"session_end_not_before_start"},
        ),
        (
            "speed.user_sessions",
            SESSIONS,
            session_row(duration_seconds=1),
            {"duration_matches_bounds"},
        ),
    ],
    ids=["counts-length", "counts-unaligned", "active-length", "session-reversed", "duration"],
)
def test_inconsistent_window_bounds_fail_the_run(spark, suite, schema, row, checks) -> None:
    result = run(spark, suite, schema, row, examples=5)
    assert set(broken(result)) == checks
    assert result.verdict is Verdict.FAILED
    [bounds] = result.broken()
    assert len(bounds.examples) == 1, "the offending row is shown"


@pytest.mark.parametrize(
    ("suite", "schema", "row", "check"),
    [
        ("speed.event_counts_1m", COUNTS, count_row(events=-1), "events_not_negative"),
        (
            "speed.active_users_10m",
            ACTIVE,
            active_row(users=[], active_users=-1),
            "active_users_not_negative",
        ),
        ("speed.user_sessions", SESSIONS, session_row(events=-4), "events_not_negative"),
    ],
    ids=["counts", "active_users", "sessions"],
)
def test_a_negative_count_fails_the_run(spark, suite, schema, row, check) -> None:
    result = run(spark, suite, schema, row)
    assert broken(result)[check] == (Action.FAIL, 1)
    assert result.verdict is Verdict.FAILED


def test_active_users_must_match_the_user_set(spark) -> None:
    result = run(spark, active_users_suite(), ACTIVE, active_row(active_users=3))
    assert broken(result) == {"active_users_consistent": (Action.FAIL, 1)}


# --- suites as code -------------------------------------------------------------------------


def test_only_row_level_expectations_can_route_rows() -> None:
    import great_expectations.expectations as gxe

    with pytest.raises(TypeError, match="cannot route rows"):
        Check("x", gxe.ExpectColumnValuesToBeUnique(column="event_id"), Action.QUARANTINE)


def test_views_get_their_suite_in_any_stage() -> None:
    assert suite_for("batch.event_counts_1m").name == "batch.event_counts_1m"
    assert suite_for("replay_3.user_sessions").checks == user_sessions_suite().checks
    with pytest.raises(ValueError, match="EventTimeBounds"):
        suite_for("silver.events")
    with pytest.raises(KeyError):
        suite_for("speed.late_events")


def test_a_stream_is_refused(spark) -> None:
    stream = spark.readStream.format("rate").load()
    with pytest.raises(ValueError, match="micro-batch"):
        validate_dataframe(stream, bronze_events_raw_suite())


# --- Data Docs ------------------------------------------------------------------------------


def test_data_docs_are_written_and_name_the_suite(spark, tmp_path) -> None:
    docs = tmp_path / "dq" / "data_docs"
    first = run(spark, silver_events_suite(BOUNDS), SILVER, silver(0), docs_dir=docs)
    second = run(
        spark,
        silver_events_suite(BOUNDS),
        SILVER,
        silver(0),
        silver(1, user_id=None),
        docs_dir=docs,
        examples=5,
        run_name="scheduled__2026-03-01",
    )
    assert first.data_docs == second.data_docs == docs.resolve() / "index.html"
    index = (docs / "index.html").read_text()
    assert "silver.events" in index
    suite_page = (docs / "expectations" / "silver" / "events.html").read_text()
    assert "user_id_not_null: when broken, quarantine" in suite_page, "actions are documented"
    assert second.data_docs_page is not None and second.data_docs_page.exists()
    assert second.data_docs_examples_page is not None and second.data_docs_examples_page.exists()
    assert "scheduled__2026-03-01" in str(second.data_docs_page)
    assert first.data_docs_page is not None
    assert first.data_docs_page.relative_to(docs.resolve()).as_posix() in index, (
        "the index keeps listing earlier runs"
    )
    assert "user_id" in second.data_docs_page.read_text()
