"""What the kappa_replay DAG asks jobs.replay to do: the scheduled run extends the active
version (the recent log); a triggered run passes its form on, conflicts included, for the
job to refuse with its reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.dags.conftest import load_dag_module

FORM = {
    "start": "earliest",
    "timestamp": None,
    "offsets": None,
    "version": None,
    "extend": None,
    "dry_run": False,
    "auto_promote": False,
    "force": False,
    "mode": None,
}


@pytest.fixture(scope="module")
def kr(airflow_home: Path) -> Any:
    return load_dag_module("kappa_replay")


def test_the_scheduled_run_replays_the_recent_log(kr: Any) -> None:
    assert kr.replay_arguments(FORM, scheduled=True) == ["--scheduled"]


def test_a_triggered_run_replays_from_the_forms_start(kr: Any) -> None:
    form = {**FORM, "start": "timestamp", "timestamp": "2026-11-25T10:00:00Z", "version": "v7"}
    assert kr.replay_arguments(form, scheduled=False) == [
        "--start",
        "timestamp",
        "--timestamp",
        "2026-11-25T10:00:00Z",
        "--version",
        "v7",
    ]


def test_extend_from_the_form_continues_that_version(kr: Any) -> None:
    form = {**FORM, "extend": "v3", "dry_run": True}
    assert kr.replay_arguments(form, scheduled=False) == ["--extend", "v3", "--dry-run"]


def test_extend_with_another_start_is_passed_on_for_the_job_to_refuse(kr: Any) -> None:
    form = {**FORM, "extend": "v3", "start": "offsets", "offsets": '{"0": 5}'}
    assert kr.replay_arguments(form, scheduled=False) == [
        "--extend",
        "v3",
        "--start",
        "offsets",
        "--offsets",
        '{"0": 5}',
    ]
