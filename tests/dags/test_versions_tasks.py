"""The promote_version and rollback_version DAGs' tasks, run here with jobs.versions in-process
on a lakehouse of the test's own: a refusal fails the run at once with the job's reason and
changes nothing. An empty lakehouse is the case for both, whatever the services' lakehouse
holds (its pointer may have a promotion another run left)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.dags.conftest import DagFile, load_dag_file

if TYPE_CHECKING:
    from dags.support.job_runner import RunJob


# Loaded before a test starts: Airflow sets up its logging when it first parses a DAG, which
# would take caplog's handler away from a test that has begun.
@pytest.fixture(scope="module")
def promote(airflow_home: Path) -> DagFile:
    return load_dag_file("promote_version")


@pytest.fixture(scope="module")
def rollback(airflow_home: Path) -> DagFile:
    return load_dag_file("rollback_version")


def test_promoting_a_version_that_does_not_exist_fails_with_the_reason(
    promote: DagFile, jobs_here: RunJob, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    from dags.support.failure import Refused

    caplog.set_level(logging.INFO, logger="tributary.dags")
    context = promote.context("promote", {"version": "tmissing", "force": False})
    with pytest.raises(Refused, match="tmissing was not promoted") as refused:
        promote.module.promote_requested(context, run=jobs_here)
    assert type(refused.value) is Refused
    assert "no version 'tmissing'" in caplog.text and "nothing changed" in caplog.text
    # The reason is the failure's own message and its exit code, which Airflow logs as the
    # task's one ERROR line.
    assert "no version 'tmissing'" in str(refused.value) == refused.value.code
    assert not (tmp_path / "lakehouse" / "ops" / "serving_pointer").exists()


def test_rollback_with_nothing_promoted_fails_with_the_reason(
    rollback: DagFile, jobs_here: RunJob, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    from dags.support.failure import Refused

    caplog.set_level(logging.INFO, logger="tributary.dags")
    with pytest.raises(Refused, match="nothing was rolled back") as refused:
        rollback.module.roll_back(run=jobs_here)
    assert type(refused.value) is Refused
    assert "nothing to roll back" in caplog.text, caplog.text
    assert "nothing to roll back" in str(refused.value)
    assert not (tmp_path / "lakehouse" / "ops" / "serving_pointer").exists()
