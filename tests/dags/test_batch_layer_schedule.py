"""The batch_layer DAG's data intervals are the hours it recomputes, and it publishes one
asset per batch view."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pendulum
import pytest


def datetime(*args: int) -> pendulum.DateTime:
    # Airflow's timetables work on pendulum's DateTime.
    return pendulum.datetime(*args, tz="UTC")


@pytest.fixture(scope="module")
def batch_dag(airflow_home: Path) -> Any:
    from airflow.dag_processing.dagbag import DagBag

    from tests.dags.conftest import DAGS_FOLDER

    bag = DagBag(dag_folder=DAGS_FOLDER / "batch_layer.py", safe_mode=False)
    assert not bag.import_errors, bag.import_errors
    return bag.dags["batch_layer"]


def test_a_manual_run_recomputes_the_last_complete_hour(batch_dag: Any) -> None:
    run_after = datetime(2026, 11, 26, 10, 25)
    interval = batch_dag.timetable.infer_manual_data_interval(run_after=run_after)
    assert (interval.start, interval.end) == (
        datetime(2026, 11, 26, 9),
        datetime(2026, 11, 26, 10),
    )


def test_scheduled_runs_cover_consecutive_hours(batch_dag: Any) -> None:
    from airflow.timetables.base import DataInterval, TimeRestriction

    first = batch_dag.timetable.next_dagrun_info(
        last_automated_data_interval=DataInterval(
            datetime(2026, 11, 26, 9), datetime(2026, 11, 26, 10)
        ),
        restriction=TimeRestriction(datetime(2026, 1, 1), None, catchup=True),
    )
    assert (first.data_interval.start, first.data_interval.end) == (
        datetime(2026, 11, 26, 10),
        datetime(2026, 11, 26, 11),
    )


def test_the_recompute_task_publishes_an_asset_per_view(batch_dag: Any) -> None:
    from lakehouse.transforms.views import VIEWS

    outlets = batch_dag.get_task("recompute").outlets
    assert sorted(a.name for a in outlets) == sorted(f"batch.{v}" for v in VIEWS)


def test_a_run_waits_for_the_previous_one(batch_dag: Any) -> None:
    assert batch_dag.max_active_runs == 1
