"""The stream joins' health from their progress rows and their source tables' versions (pure):
commits newer than what a batch read through wait; stale only while they do, a new stream
gets time for its first batch."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lakehouse.core.config import Settings, load_settings
from lakehouse.joins import windowed_supervisor as sup

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
EVENTS, PAYMENTS = "/lake/silver/events", "/lake/silver/payments"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(environ={"TRIBUTARY_CACHE": str(tmp_path / "cache")})


def row(batch: int, seconds_ago: float, **read: tuple[int, int]) -> dict[str, Any]:
    """A progress row whose sources read each named table to (reservoirVersion, index)."""
    paths = {"events": EVENTS, "payments": PAYMENTS}
    sources = [
        {
            "description": f"DeltaSource[file:{paths[name]}]",
            "startOffset": None,
            "endOffset": {"reservoirVersion": version, "index": index},
        }
        for name, (version, index) in read.items()
    ]
    return {
        "query": "attribution",
        "batch_id": batch,
        "processed_at": NOW - timedelta(seconds=seconds_ago),
        "watermark": NOW,
        "state_rows": 7,
        "sources": json.dumps(sources),
    }


def test_a_batch_ending_at_a_version_boundary_has_read_the_version_before_it() -> None:
    rows = [row(3, 5, events=(8, -1), payments=(4, 2)), row(2, 9, events=(6, -1))]
    assert sup.read_versions(rows) == {EVENTS: 7, PAYMENTS: 4}


def test_stale_when_no_batch_came_for_too_long_while_source_commits_wait(settings) -> None:
    limit = settings.speed.stale_after_seconds
    rows = [row(3, limit + 30, events=(8, -1))]
    health = sup.judge_stream_joins(rows, NOW, {f"file:{EVENTS}": 10}, settings)
    assert health.status == "stale" and health.remedy == "restart"
    assert "their sources have 3 newer commits" in health.message
    assert health.records_waiting == 3 and health.batch_id == 3


def test_quiet_sources_read_to_their_end_are_healthy_however_old_the_batch(settings) -> None:
    rows = [row(3, 10 * settings.speed.stale_after_seconds, events=(8, -1))]
    health = sup.judge_stream_joins(rows, NOW, {EVENTS: 7, PAYMENTS: None}, settings)
    assert health.status == "healthy" and "sources have 0 newer commits" in health.message


def test_new_joins_get_time_for_their_first_batch_then_are_stale(settings) -> None:
    started = NOW - timedelta(seconds=30)
    health = sup.judge_stream_joins([], NOW, {EVENTS: 2}, settings, running_since=started)
    assert health.status == "starting" and "3 commits to read" in health.message
    late = NOW - timedelta(seconds=settings.speed.stale_after_seconds + 1)
    assert sup.judge_stream_joins([], NOW, {EVENTS: 2}, settings, late).status == "stale"


def test_the_stream_joins_have_files_of_their_own(settings: Settings, tmp_path: Path) -> None:
    joins = sup.StreamJoinsSupervisor(settings, run_dir=tmp_path)
    assert joins.proc.pid_file == tmp_path / "stream_joins.pid"
    assert joins.stop_file.name == "stream_joins.stop"
    assert joins.stream.module == "jobs.stream_joins"
