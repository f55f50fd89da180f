"""The changelog stream's health from its progress rows and its topics' lag (pure, with Kafka's
offsets faked): stale only while records wait, a quiet stream that has read everything healthy,
and a partition no recent batch names counted from where those batches leave it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lakehouse.cdc import supervisor as sup
from lakehouse.core.config import Settings, load_settings

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
USERS, PRODUCTS, ORDERS = "shop.public.users", "shop.public.products", "shop.public.orders"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(environ={"TRIBUTARY_CACHE": str(tmp_path / "cache")})


def row(batch: int, seconds_ago: float, **offsets: int) -> dict[str, Any]:
    return {
        "batch_id": batch,
        "processed_at": NOW - timedelta(seconds=seconds_ago),
        "records": 3,
        "applied": {"users": 2},
        "offsets": {f"shop.public.{k}:0": v for k, v in offsets.items()},
    }


def test_offsets_are_the_furthest_each_partition_was_read_over_the_rows() -> None:
    rows = [row(2, 10, users=9), row(1, 20, users=5, products=4)]
    assert sup.read_offsets(rows) == {f"{USERS}:0": 9, f"{PRODUCTS}:0": 4}


def test_stale_when_no_batch_came_for_too_long_while_records_wait(settings: Settings) -> None:
    limit = settings.speed.stale_after_seconds
    rows = [row(7, limit + 60, users=9)]
    health = sup.judge_changelog(rows, NOW, {f"{USERS}:0": 4}, settings)
    assert health.status == "stale" and health.remedy == "restart"
    assert f"limit {limit} s" in health.message and f"{USERS}:0 4" in health.message
    assert health.records_waiting == 4 and health.batch_id == 7


def test_a_quiet_stream_that_read_everything_is_healthy_however_old_its_batch(
    settings: Settings,
) -> None:
    rows = [row(7, 10 * settings.speed.stale_after_seconds, users=9)]
    health = sup.judge_changelog(rows, NOW, {f"{USERS}:0": 0}, settings)
    assert health.status == "healthy" and "0 records wait (none)" in health.message


def test_a_new_stream_gets_time_for_its_first_batch(settings: Settings) -> None:
    started = NOW - timedelta(seconds=30)
    rows = [row(7, 3600, users=9)]
    health = sup.judge_changelog(rows, NOW, {f"{USERS}:0": 2}, settings, running_since=started)
    assert health.status == "starting" and health.remedy == "wait"
    # Past the limit since its start, it is stale.
    late = NOW - timedelta(seconds=settings.speed.stale_after_seconds + 1)
    assert sup.judge_changelog(rows, NOW, {"t:0": 2}, settings, late).status == "stale"


def _fake_kafka(
    monkeypatch: pytest.MonkeyPatch, ends: dict[str, int], starts: dict[str, int], at: int
) -> list[str]:
    asked: list[str] = []
    import lakehouse.core.kafka_offsets as offsets

    monkeypatch.setattr(offsets, "end_offsets", lambda _s, t: {0: ends[t]} if t in ends else {})
    monkeypatch.setattr(offsets, "log_bounds", lambda _s, t: {0: (starts[t], ends[t])})

    def offsets_at(_s: Settings, topic: str, moment: datetime) -> dict[int, int]:
        asked.append(topic)
        return {0: at}

    monkeypatch.setattr(offsets, "offsets_at", offsets_at)
    return asked


def test_lag_of_a_partition_no_recent_batch_read_counts_from_the_oldest_of_them(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _fake_kafka(monkeypatch, {USERS: 12, PRODUCTS: 40}, {USERS: 0, PRODUCTS: 0}, at=38)
    rows = [row(9, 5, users=12), row(8, 50, users=10)]
    lag = sup.changelog_lag(settings, rows, complete=False)
    # orders' topic does not exist yet; products: what came after the oldest batch read.
    assert lag == {f"{USERS}:0": 0, f"{PRODUCTS}:0": 2}
    assert asked == [PRODUCTS]


def test_when_the_rows_are_all_there_are_an_unnamed_partition_was_never_read(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_kafka(monkeypatch, {USERS: 12, ORDERS: 7}, {USERS: 0, ORDERS: 2}, at=99)
    assert sup.changelog_lag(settings, [row(0, 5, users=12)], complete=True) == {
        f"{USERS}:0": 0,
        f"{ORDERS}:0": 5,
    }
    assert sup.changelog_lag(settings, [], complete=True)[f"{USERS}:0"] == 12


def test_the_changelog_stream_has_files_of_its_own(settings: Settings, tmp_path: Path) -> None:
    changelog = sup.ChangelogSupervisor(settings, run_dir=tmp_path)
    assert changelog.proc.pid_file == tmp_path / "cdc.pid"
    assert changelog.hold_file == tmp_path / "cdc.held"
    assert changelog.stop_file.name == "cdc.stop" and changelog.stream.module == "jobs.cdc"
