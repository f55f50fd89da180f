"""The commerce stream's health, judged as the changelog stream's is (lakehouse.cdc.supervisor)
but over the payments and order-events topics and with its own batch line (Kafka's offsets
faked, as in tests/unit/cdc/test_supervisor.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lakehouse.cdc.supervisor import changelog_lag, judge_changelog
from lakehouse.commerce import supervisor as sup
from lakehouse.core.config import Settings, load_settings

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(environ={"TRIBUTARY_CACHE": str(tmp_path / "cache")})


def row(batch: int, seconds_ago: float, **offsets: int) -> dict[str, Any]:
    return {
        "batch_id": batch,
        "processed_at": NOW - timedelta(seconds=seconds_ago),
        "records": 9,
        "order_events": 6,
        "applied": 5,
        "rejected": 1,
        "payments": 2,
        "offsets": {f"{topic.replace('_', '-')}:0": n for topic, n in offsets.items()},
    }


def test_lag_counts_both_commerce_topics_beyond_what_the_stream_read(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lakehouse.core.kafka_offsets as offsets

    ends = {"order-events": 12, "payments": 30}
    monkeypatch.setattr(offsets, "end_offsets", lambda _s, t: {0: ends[t]} if t in ends else {})
    monkeypatch.setattr(offsets, "log_bounds", lambda _s, t: {0: (0, ends[t])})
    topics = sup.commerce_topics(settings)
    assert topics == ("order-events", "payments")
    lag = changelog_lag(settings, [row(3, 5, order_events=12, payments=25)], True, topics)
    assert lag == {"order-events:0": 0, "payments:0": 5}


def test_stale_names_the_commerce_stream_and_its_last_batch(settings: Settings) -> None:
    limit = settings.speed.stale_after_seconds
    rows = [row(7, limit + 60, order_events=12)]
    health = judge_changelog(
        rows, NOW, {"payments:0": 4}, settings, None, "commerce", sup.describe_batch
    )
    assert health.status == "stale" and health.remedy == "restart"
    assert health.message.startswith(f"stale: no commerce batch for {limit + 60} s")
    assert "wait in the commerce topics (payments:0 4)" in health.message
    assert "9 records (6 order events: 5 applied, 1 rejected; 2 payments)" in health.message


def test_the_commerce_stream_has_files_of_its_own(settings: Settings, tmp_path: Path) -> None:
    commerce = sup.CommerceSupervisor(settings, run_dir=tmp_path)
    assert commerce.proc.pid_file == tmp_path / "commerce.pid"
    assert commerce.hold_file == tmp_path / "commerce.held"
    assert commerce.stop_file.name == "commerce.stop"
    assert commerce.stream.module == "jobs.commerce"
