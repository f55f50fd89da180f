"""The enrichment stream's health from its newest progress row and silver's latest version
(pure): stale only while silver has commits it has not read, a quiet stream that read
everything healthy however old its batch, a new one given time for its first batch."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lakehouse.core.config import Settings, load_settings
from lakehouse.joins.supervisor import EnrichmentSupervisor, judge_enrichment

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(environ={"TRIBUTARY_CACHE": str(tmp_path / "cache")})


def row(batch: int, seconds_ago: float, silver: int) -> dict[str, Any]:
    return {
        "batch_id": batch,
        "processed_at": NOW - timedelta(seconds=seconds_ago),
        "events": 40,
        "corrected": 2,
        "versions": {"users": 3, "products": 5, "silver": silver},
    }


def test_stale_when_no_batch_came_for_too_long_while_silver_has_newer_commits(
    settings: Settings,
) -> None:
    limit = settings.speed.stale_after_seconds
    health = judge_enrichment([row(7, limit + 60, silver=12)], NOW, 15, settings)
    assert (health.status, health.remedy, health.records_waiting) == ("stale", "restart", 3)
    assert f"limit {limit} s" in health.message and "3 newer commits" in health.message


def test_a_quiet_stream_that_read_everything_is_healthy_however_old_its_batch(
    settings: Settings,
) -> None:
    old = 10 * settings.speed.stale_after_seconds
    health = judge_enrichment([row(7, old, silver=15)], NOW, 15, settings)
    assert health.status == "healthy" and health.records_waiting == 0
    assert "last enrichment batch 7 at" in health.message and "2 corrected" in health.message


def test_a_new_stream_gets_time_for_its_first_batch(settings: Settings) -> None:
    started = NOW - timedelta(seconds=30)
    health = judge_enrichment([], NOW, 4, settings, running_since=started)
    assert (health.status, health.remedy, health.records_waiting) == ("starting", "wait", 5)
    # Without silver there is nothing to read: healthy, not starting.
    assert judge_enrichment([], NOW, None, settings, started).status == "healthy"


def test_the_enrichment_stream_has_files_of_its_own(settings: Settings, tmp_path: Path) -> None:
    supervisor = EnrichmentSupervisor(settings, run_dir=tmp_path / "run")
    assert supervisor.proc.pid_file.name == "enrich.pid"
    assert supervisor.stop_file.name == "enrich.stop" and supervisor.stream.module == "jobs.enrich"
