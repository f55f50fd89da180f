"""What a reconcile run compares: the triggering batch runs (batch vs speed over what they
recomputed), a triggering replay (its version vs live), or the form's choice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.dags.conftest import load_dag_file, load_dag_module, triggering_events

DEFAULTS = {"left": "batch", "right": "speed", "view": "all", "start": None, "end": None}


@pytest.fixture(scope="module")
def rc(airflow_home: Path) -> Any:
    return load_dag_module("reconcile")


def test_a_run_triggered_by_replays_compares_each_version_with_live(rc: Any) -> None:
    events = triggering_events(
        (rc.REPLAY_ASSET, {"version": "v3"}, "manual__1"),
        (rc.REPLAY_ASSET, {"version": "v4"}, "manual__2"),
    )
    found = rc._comparisons({"params": DEFAULTS, "triggering_asset_events": events})
    assert found == [
        ("replay:v3 vs speed", ["--left", "replay:v3", "--right", "speed"], True),
        ("replay:v4 vs speed", ["--left", "replay:v4", "--right", "speed"], True),
    ]


def test_batch_runs_and_a_replay_queued_together_are_all_compared(rc: Any) -> None:
    events = triggering_events(
        *((asset, {}, "scheduled__a") for asset in rc.BATCH_ASSETS),
        (rc.REPLAY_ASSET, {"version": "v5"}, "manual__3"),
    )
    found = rc._comparisons({"params": DEFAULTS, "triggering_asset_events": events})
    assert found == [
        (
            "batch vs speed",
            ["--left", "batch", "--right", "speed", "--batch-run", "scheduled__a"],
            False,
        ),
        ("replay:v5 vs speed", ["--left", "replay:v5", "--right", "speed"], True),
    ]


def test_an_announced_version_the_lakehouse_lacks_is_skipped_not_failed(
    airflow_home: Path, jobs_here: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """An announcement older than the lakehouse (reset since) names a version it never held:
    the run says so and skips, while the same version asked for by hand fails the run."""
    from airflow.sdk.exceptions import AirflowSkipException

    from dags.support.failure import Refused

    dag_file = load_dag_file("reconcile")
    announced = dag_file.context("compare", run_type="asset_triggered")
    announced["triggering_asset_events"] = triggering_events(
        (dag_file.module.REPLAY_ASSET, {"version": "gone"}, "manual__9")
    )
    with pytest.raises(AirflowSkipException):
        dag_file.module.compare_sources(announced, jobs_here)
    assert "replay:gone vs speed: the announced version is not in the lakehouse" in caplog.text
    asked = dag_file.context("compare", {"left": "replay:gone", "right": "speed"})
    with pytest.raises(Refused, match="bad parameters"):
        dag_file.module.compare_sources(asked, jobs_here)


def test_a_manual_run_compares_what_the_form_asks(rc: Any) -> None:
    params = {**DEFAULTS, "left": "replay:v2", "right": "batch", "view": "user_sessions"}
    found = rc._comparisons({"params": params, "triggering_asset_events": {}})
    assert found == [
        (
            "replay:v2 vs batch",
            ["--left", "replay:v2", "--right", "batch", "--view", "user_sessions"],
            False,
        )
    ]


def test_a_run_triggered_by_batch_runs_compares_what_they_recomputed(rc: Any) -> None:
    events = triggering_events(
        *((asset, {}, "scheduled__b") for asset in rc.BATCH_ASSETS),
        *((asset, {}, "scheduled__a") for asset in rc.BATCH_ASSETS),
    )
    args = rc._arguments({"params": DEFAULTS, "triggering_asset_events": events})
    assert args == [
        "--left",
        "batch",
        "--right",
        "speed",
        "--batch-run",
        "scheduled__a",
        "--batch-run",
        "scheduled__b",
    ]


def test_the_schedule_waits_for_all_batch_assets_or_a_replay(rc: Any) -> None:
    from airflow.dag_processing.dagbag import DagBag

    from tests.dags.conftest import DAGS_FOLDER

    bag = DagBag(dag_folder=DAGS_FOLDER / "reconcile.py", safe_mode=False)
    assert not bag.import_errors, bag.import_errors
    condition = bag.dags["reconcile"].timetable.asset_condition
    # All three batch views (one batch run), or a replay.
    assert type(condition).__name__ == "AssetAny"
    every_batch_view, replay = condition.objects
    assert type(every_batch_view).__name__ == "AssetAll"
    assert list(every_batch_view.objects) == rc.BATCH_ASSETS
    assert replay == rc.REPLAY_ASSET
