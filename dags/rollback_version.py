"""Roll the serving layer back to the version that was active before (jobs/versions.py)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from airflow.sdk import dag, task

if TYPE_CHECKING:
    from dags.support.job_runner import RunJob

log = logging.getLogger("tributary.dags.rollback_version")

DOC = """
### Roll back the serving version

Switches `ops.serving_pointer` back to the version that was active before the current one
(a replay version, or `live`: the speed layer's own tables), in one Delta commit. Nothing is
deleted; promote again to undo. Fails with the reason when nothing was ever promoted.
"""


@dag(
    dag_id="rollback_version",
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    tags=["tributary", "kappa"],
    description="Switch serving back to the previously active version",
    doc_md=DOC,
)
def rollback_version() -> None:
    @task(execution_timeout=timedelta(minutes=30))
    def rollback() -> None:
        roll_back()

    rollback()


def roll_back(run: RunJob | None = None) -> None:
    """The rollback task (tests run the job in-process through `run`): jobs.versions
    rollback; a refusal fails the run at once, with the reason."""
    from dags.support.job_runner import run_job
    from jobs.contract import Exit

    outcome = (run or run_job)("jobs.versions", ["rollback"], on_line=log.info)
    if outcome.returncode in (Exit.BAD_REQUEST, Exit.CHECKS_FAILED):
        raise outcome.refusal("nothing was rolled back")
    if outcome.returncode != Exit.OK:
        raise outcome.failure("jobs.versions")


rollback_version()
