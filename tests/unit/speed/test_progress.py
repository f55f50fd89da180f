"""The speed layer's health rules (lakehouse.speed.progress.judge_health) on hand-built rows."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lakehouse.core.config import Settings, load_settings
from lakehouse.speed.progress import Health, judge_health, records_waiting

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
STALE_AFTER = 300
SLO = 120


@pytest.fixture(scope="module")
def settings() -> Settings:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRIBUTARY")}
    env["TRIBUTARY__SPEED__STALE_AFTER_SECONDS"] = str(STALE_AFTER)
    env["TRIBUTARY__SPEED__FRESHNESS_SLO_SECONDS"] = str(SLO)
    return load_settings(profile="local", environ=env)


def batch(
    batch_id: int,
    seconds_ago: float,
    offsets: dict[int, int],
    total_lag: int | None = 0,
    freshness: float | None = 1.5,
    input_rows: int = 100,
    app_id: str = "speed_layer:q1",
) -> dict[str, Any]:
    return {
        "app_id": app_id,
        "batch_id": batch_id,
        "processed_at": NOW - timedelta(seconds=seconds_ago),
        "duration_seconds": 0.8,
        "input_rows": input_rows,
        "rows_per_second": input_rows / 0.8,
        "freshness_seconds": freshness,
        "total_lag": total_lag,
        "kafka_lag": None,
        "offsets": offsets,
    }


def judge(
    rows: list[dict[str, Any]], ends: dict[int, int], settings: Settings, **kw: Any
) -> Health:
    return judge_health(rows, NOW, ends, settings, **kw)


def test_records_waiting_counts_unread_records_per_partition() -> None:
    assert records_waiting({0: 10, 1: 5}, {0: 12, 1: 5, 2: 3}) == 2 + 0 + 3
    assert records_waiting(None, {0: 4}) == 4
    assert records_waiting({0: 10}, {0: 8}) == 0  # never negative


def test_no_rows_yet_is_starting(settings: Settings) -> None:
    health = judge([], {0: 500}, settings)
    assert (health.status, health.remedy, health.records_waiting) == ("starting", "wait", 500)
    assert "500 records wait" in health.message


def test_no_rows_and_empty_topic_is_starting_with_nothing_to_do(settings: Settings) -> None:
    health = judge([], {0: 0, 1: 0}, settings)
    assert health.status == "starting" and health.records_waiting == 0
    assert "nothing" in health.message


def test_recent_batch_with_small_lag_is_healthy(settings: Settings) -> None:
    rows = [batch(7, 3, {0: 1000}, total_lag=5), batch(6, 6, {0: 900}, total_lag=3)]
    health = judge(rows, {0: 1005}, settings)
    assert (health.status, health.remedy, health.batch_id) == ("healthy", "none", 7)
    assert health.last_batch_at == NOW - timedelta(seconds=3)
    assert "batch 7" in health.message and "5 records wait" in health.message


def test_no_batch_for_long_while_records_wait_is_stale(settings: Settings) -> None:
    rows = [batch(7, STALE_AFTER + 100, {0: 1000})]
    health = judge(rows, {0: 1250}, settings)
    assert (health.status, health.remedy) == ("stale", "restart")
    assert f"no micro-batch for {STALE_AFTER + 100} s" in health.message
    assert f"limit {STALE_AFTER} s" in health.message and "250 records wait" in health.message


def test_idle_stream_with_nothing_waiting_is_not_stale(settings: Settings) -> None:
    rows = [batch(7, 3600, {0: 1000, 1: 20})]
    assert judge(rows, {0: 1000, 1: 20}, settings).status == "healthy"


def test_a_freshly_started_process_is_not_stale_yet(settings: Settings) -> None:
    rows = [batch(7, 3600, {0: 1000})]
    started = NOW - timedelta(seconds=30)
    health = judge(rows, {0: 1100}, settings, running_since=started)
    assert (health.status, health.remedy) == ("starting", "wait")
    assert "up 30 s" in health.message and "since it started" in health.message


def test_a_process_that_never_commits_a_batch_becomes_stale(settings: Settings) -> None:
    started = NOW - timedelta(seconds=STALE_AFTER + 60)
    health = judge([], {0: 100}, settings, running_since=started)
    assert (health.status, health.remedy) == ("stale", "restart")


def test_a_batch_after_the_start_ends_starting(settings: Settings) -> None:
    rows = [batch(8, 5, {0: 1100}), batch(7, 3600, {0: 1000})]
    started = NOW - timedelta(seconds=30)
    assert judge(rows, {0: 1100}, settings, running_since=started).status == "healthy"


def test_lag_growing_over_several_batches_is_lagging(settings: Settings) -> None:
    lags = [5000, 4000, 3000, 2000, 1000]  # newest first
    rows = [batch(20 - i, 2 * i + 1, {0: 10_000}, total_lag=lag) for i, lag in enumerate(lags)]
    health = judge(rows, {0: 15_000}, settings)
    assert (health.status, health.remedy) == ("lagging", "none")
    assert "1,000 → 2,000 → 3,000 → 4,000 → 5,000" in health.message


def test_lag_growing_for_too_few_batches_is_not_lagging(settings: Settings) -> None:
    lags = [5000, 4000, 3000, 2000, 2500]  # fell once within the window
    rows = [batch(20 - i, 2 * i + 1, {0: 10_000}, total_lag=lag) for i, lag in enumerate(lags)]
    assert judge(rows, {0: 15_000}, settings).status == "healthy"


def test_growing_lag_below_one_batch_of_input_is_not_lagging(settings: Settings) -> None:
    # A steady stream ends each batch with what arrived meanwhile; the next batch takes it.
    lags = [90, 80, 70, 60, 50]
    rows = [batch(20 - i, 2 * i + 1, {0: 10_000}, total_lag=lag) for i, lag in enumerate(lags)]
    assert judge(rows, {0: 10_090}, settings).status == "healthy"


def test_lag_trend_only_counts_the_current_application(settings: Settings) -> None:
    rows = [batch(3 - i, 2 * i + 1, {0: 10_000}, total_lag=5000 - i * 1000) for i in range(3)]
    rows += [batch(9, 20, {0: 10_000}, total_lag=1000, app_id="speed_layer:old")] * 2
    assert judge(rows, {0: 15_000}, settings).status != "lagging"


def test_freshness_over_the_slo_with_lag_is_slow(settings: Settings) -> None:
    rows = [batch(7, 3, {0: 1000}, total_lag=40, freshness=SLO + 30.0)]
    health = judge(rows, {0: 1040}, settings)
    assert (health.status, health.remedy) == ("slow", "none")
    assert f"freshness {SLO + 30} s" in health.message and f"{SLO} s SLO" in health.message
    assert "40 records wait" in health.message


def test_slow_but_lag_shrinking_says_catching_up(settings: Settings) -> None:
    rows = [
        batch(8, 3, {0: 2000}, total_lag=400, freshness=SLO * 3.0),
        batch(7, 6, {0: 1000}, total_lag=900, freshness=SLO * 4.0),
    ]
    health = judge(rows, {0: 2400}, settings)
    assert (health.status, health.remedy) == ("slow", "wait")
    assert "catching up" in health.message


def test_old_events_with_no_lag_are_not_slow(settings: Settings) -> None:
    # Replayed history is old by nature; with nothing waiting the stream is keeping up.
    rows = [batch(7, 3, {0: 1000}, total_lag=0, freshness=86_400.0)]
    assert judge(rows, {0: 1000}, settings).status == "healthy"


def test_naive_timestamps_are_taken_as_utc(settings: Settings) -> None:
    row = batch(7, 3, {0: 1000})
    row["processed_at"] = row["processed_at"].replace(tzinfo=None)
    assert judge([row], {0: 1000}, settings).status == "healthy"
