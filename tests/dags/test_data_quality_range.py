"""Which rows a data_quality run validates: the form's range, else the intervals the
triggering batch runs recomputed (from their asset events), else the 2 days before."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.dags.conftest import load_dag_module, triggering_events

RUN_AFTER = datetime(2026, 11, 26, 12, 5, tzinfo=UTC)


@pytest.fixture(scope="module")
def dq(airflow_home: Path) -> Any:
    return load_dag_module("data_quality")


def batch_runs(dq: Any, *intervals: tuple[str, str]) -> Any:
    return triggering_events(
        *(
            (asset, {"interval_start": start, "interval_end": end}, f"scheduled__{start}")
            for start, end in intervals
            for asset in dq.BATCH_ASSETS
        )
    )


def context(params: dict[str, Any] | None = None, events: Any = None) -> dict[str, Any]:
    class Run:
        run_after = RUN_AFTER

    return {
        "params": {"layer": "all", **(params or {})},
        "dag_run": Run(),
        "triggering_asset_events": events or {},
    }


def test_a_run_triggered_by_batch_runs_validates_the_intervals_they_recomputed(dq: Any) -> None:
    events = batch_runs(
        dq,
        ("2026-11-26T10:00:00+00:00", "2026-11-26T11:00:00+00:00"),
        ("2026-11-26T09:00:00+00:00", "2026-11-26T10:00:00+00:00"),
    )
    args = dq._arguments(context(events=events))
    assert args == [
        "--layer",
        "all",
        "--to",
        "2026-11-26T11:00:00+00:00",
        "--from",
        "2026-11-26T09:00:00+00:00",
    ]


def test_the_form_range_wins_over_the_triggering_events(dq: Any) -> None:
    events = batch_runs(dq, ("2026-11-26T10:00:00+00:00", "2026-11-26T11:00:00+00:00"))
    params = {"layer": "silver", "start": "2026-11-01T00:00:00Z", "end": "2026-11-02T00:00:00Z"}
    assert dq._arguments(context(params, events)) == [
        "--layer",
        "silver",
        "--to",
        "2026-11-02T00:00:00Z",
        "--from",
        "2026-11-01T00:00:00Z",
    ]


def test_a_manual_run_without_a_range_ends_when_it_was_triggered(dq: Any) -> None:
    assert dq._arguments(context()) == ["--layer", "all", "--to", RUN_AFTER.isoformat()]
