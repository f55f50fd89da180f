from datetime import UTC, datetime, timedelta

from lakehouse.replay.versions import pinned_since, pins_of, unserved_note


def row(action: str, version: str, pins: dict[str, int] | None = None, at: int = 0) -> dict:
    return {"action": action, "version": version, "active": version, "pins": pins, "at_micros": at}


def test_a_version_is_read_where_its_gate_last_passed() -> None:
    history = [
        row("promote", "v1", {"progress": 3, "event_counts_1m": 2}),
        row("advance", "v1", {"progress": 7, "event_counts_1m": 5}),
    ]
    assert pins_of(history, "v1") == {"progress": 7, "event_counts_1m": 5}


def test_a_rollback_or_removal_records_no_pins_and_keeps_the_last_checked_ones() -> None:
    history = [
        row("promote", "v1", {"progress": 3}),
        row("promote", "v2", {"progress": 9}),
        row("rollback", "v2"),
    ]
    assert pins_of(history, "v1") == {"progress": 3}
    assert pins_of(history, "v2") == {"progress": 9}


def test_a_version_promoted_before_pins_existed_is_read_at_its_latest() -> None:
    assert pins_of([row("promote", "v1")], "v1") is None
    assert pins_of([], "v1") is None


def test_the_pins_date_from_the_row_that_recorded_them() -> None:
    history = [
        row("promote", "v1", {"progress": 3}, at=1_000_000),
        row("advance", "v1", {"progress": 7}, at=2_000_000),
        row("rollback", "v1", at=3_000_000),
    ]
    assert pinned_since(history, "v1") == datetime(1970, 1, 1, 0, 0, 2, tzinfo=UTC)
    assert pinned_since([row("promote", "v1")], "v1") is None


def test_a_version_whose_gate_has_failed_for_a_week_is_flagged_before_its_pins_expire() -> None:
    since = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    recent = unserved_note("v3", since, since + timedelta(hours=30))
    assert "(2026-11-01 12:00 UTC, 30 h ago)" in recent and "warning" not in recent
    stale = unserved_note("v3", since, since + timedelta(days=8))
    assert "warning: its gate has not passed for over 7 days" in stale
    assert "delta.logRetentionDuration" in stale
    assert "warning" not in unserved_note("v3", None, since)
