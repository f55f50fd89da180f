from lakehouse.versions import pins_of


def row(action: str, version: str, pins: dict[str, int] | None = None) -> dict:
    return {"action": action, "version": version, "active": version, "pins": pins}


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
