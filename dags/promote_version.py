"""Promote a replay version: the serving layer reads it from now on (jobs/versions.py)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import Param, dag, get_current_context, task

from dags.support.failure import Refused
from dags.support.form_fields import version_param

if TYPE_CHECKING:
    from dags.support.job_runner import RunJob

log = logging.getLogger("tributary.dags.promote_version")

DOC = """
### Promote a replay version

Switches the serving layer's pointer (`ops.serving_pointer`) to a replay version in one Delta
commit: readers see the old version or the new one, never a mix. Refused unless the version
has caught up and its **reconciliation gate** passes (replay vs live, and in lambda mode
replay vs batch: every window equal, or its difference explained by a recorded late event).
*Force* promotes past a failed gate; the pointer records that, and the gate's verdict.
The previous version is kept: the `rollback_version` DAG switches back.

Serving reads a version as its gate last saw it. Promoting the **active** version checks
again what its extensions added since (one whose gate failed in the `kappa_replay` run) and
serves it if the gate passes (or with *Force*).
"""


@dag(
    dag_id="promote_version",
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    tags=["tributary", "kappa"],
    description="Promote a caught-up replay version to serving, after its gate",
    doc_md=DOC,
    params={
        "version": version_param(
            None, "Version", "The replay version to promote (the Tributary view lists them)"
        ),
        "force": Param(
            False,
            type="boolean",
            title="Force",
            description="Promote even if the reconciliation gate fails (recorded)",
        ),
    },
)
def promote_version() -> None:
    @task(execution_timeout=timedelta(hours=1))
    def promote() -> str:
        return promote_requested(get_current_context())

    promote()


def promote_requested(context: Mapping[str, Any], run: RunJob | None = None) -> str:
    """The promote task (callable with a context; tests run the job in-process through
    `run`): jobs.versions promote; a refusal fails the run at once, with the reason."""
    from dags.support.job_runner import run_job
    from dags.support.run_params import checked_params
    from jobs.contract import Exit

    params = checked_params(context)
    if not params["version"]:
        raise Refused("nothing was promoted: choose the version to promote in the form")
    args = ["promote", params["version"]] + (["--force"] if params["force"] else [])
    outcome = (run or run_job)("jobs.versions", args, on_line=log.info)
    if outcome.returncode in (Exit.BAD_REQUEST, Exit.CHECKS_FAILED):
        raise outcome.refusal(f"{params['version']} was not promoted")
    if outcome.returncode != Exit.OK:
        raise outcome.failure("jobs.versions")
    return str(params["version"])


promote_version()
