"""The enrichment DAG's tasks' logic (dags/enrichment.py holds only the DAG): the enrichment
stream kept running and judged, and its output reconciled with its recompute. Each takes
what Airflow gives the task, so tests call them in-process."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .failure import Refused
from .streams import apply_stream_action, check_stream_health

if TYPE_CHECKING:
    from lakehouse.speed.supervisor import Action

    from .job_runner import RunJob

log = logging.getLogger("tributary.dags.enrichment")


def supervise_enrichment(action: Action) -> dict[str, Any]:
    """Start, stop or restart the stream as the run's `action` asks."""
    from lakehouse.core.config import get_settings
    from lakehouse.joins.supervisor import EnrichmentSupervisor

    return apply_stream_action(EnrichmentSupervisor(get_settings()), action)


def check_enrichment(done: Mapping[str, Any]) -> dict[str, Any]:
    from lakehouse.core.config import get_settings
    from lakehouse.joins.supervisor import EnrichmentSupervisor

    return check_stream_health(EnrichmentSupervisor(get_settings()), done)


def reconcile_enrichment(run: RunJob | None = None) -> dict[str, Any]:
    """jobs.enrich_reconcile: the enriched events and the revenue view against their recompute,
    as of the stream's last batch. Fails naming the first differing events and windows (not
    retried: they differ again); skipped while the stream has completed no batch. `run`:
    tests run the job in-process."""
    from airflow.sdk.exceptions import AirflowSkipException

    from jobs.contract import Exit

    from .job_runner import run_job

    outcome = (run or run_job)("jobs.enrich_reconcile", [], log.info)
    if outcome.returncode == Exit.NOTHING_TO_DO:
        raise AirflowSkipException(outcome.reason())
    result = outcome.summary("enrich_reconcile", succeeded=(Exit.OK, Exit.CHECKS_FAILED))
    if outcome.returncode == Exit.CHECKS_FAILED:
        raise Refused("\n".join([result["verdict"], *result["failures"]]))
    log.info("%s", result["verdict"])
    return result
