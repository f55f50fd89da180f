"""Run a judge job (a reconciliation that records itself) as a task: skipped when it has
nothing to compare yet, failed naming what differs, its result otherwise."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .failure import Refused

if TYPE_CHECKING:
    from .job_runner import RunJob


def run_judge(
    job: str,
    context: Mapping[str, Any],
    log: logging.Logger,
    run: RunJob | None = None,
    args: Sequence[str] = (),
) -> dict[str, Any]:
    """`python -m jobs.<job> <args> --run-id <the run's id>`: exit 3 skips the task, 4 fails it with
    the verdict and the first differences (not retried: the same rows differ again). `run`:
    tests run the job in-process."""
    from airflow.sdk.exceptions import AirflowSkipException

    from jobs.contract import Exit

    from .job_runner import run_job

    outcome = (run or run_job)(f"jobs.{job}", [*args, "--run-id", str(context["run_id"])], log.info)
    if outcome.returncode == Exit.NOTHING_TO_DO:
        raise AirflowSkipException(outcome.reason())
    result = outcome.summary(job, succeeded=(Exit.OK, Exit.CHECKS_FAILED))
    if outcome.returncode == Exit.CHECKS_FAILED:
        raise Refused("\n".join([result["verdict"], *result["failures"]]))
    log.info("%s", result["verdict"])
    return result
