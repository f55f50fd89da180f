"""The cdc DAG's tasks' logic (dags/cdc.py holds only the DAG): the connector kept running
through Connect's REST API, the changelog stream kept running and judged, its tables
reconciled with their recompute from bronze, and a table added on request with an incremental
snapshot. Each takes the context Airflow gives the task, so tests call them in-process."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .failure import Refused, TaskFailed
from .judges import run_judge
from .streams import apply_stream_action, check_stream_health

if TYPE_CHECKING:
    from .job_runner import RunJob

log = logging.getLogger("tributary.dags.cdc")


def check_form(params: Mapping[str, Any]) -> dict[str, Any]:
    """The run's parameters (checked_params: every name known) and, when a table is asked
    for, one that can be captured (it exists in the captured schema and has a primary key):
    refused before anything changes."""
    from lakehouse.cdc.connector import CdcError, check_tables
    from lakehouse.core.config import get_settings

    table = (params.get("table") or "").strip() or None
    if table is not None:
        cdc = get_settings().cdc
        if not table.isidentifier() or table != table.lower():
            raise Refused(
                f"{table!r} is not a table name: give the lower-case name of a table in schema "
                f"{cdc.schema_name}; nothing was changed"
            )
        try:
            check_tables(cdc.model_copy(update={"tables": (table,)}))
        except CdcError as err:
            raise Refused(f"{err}; nothing was changed") from None
    return {"action": params["action"], "table": table}


def ensure_connector(form: Mapping[str, Any]) -> str:
    """Register the connector if missing and see that it and its task run (a FAILED one is
    restarted through the REST API and checked again)."""
    from lakehouse.cdc.capture import ensure_changelog_topics
    from lakehouse.cdc.capture import ensure_connector as ensure
    from lakehouse.cdc.connector import CdcError
    from lakehouse.core.config import get_settings
    from lakehouse.core.kafka_io import KafkaUnavailableError

    settings = get_settings()
    # kafka-python narrates every connection at INFO; keep the outcome line readable.
    logging.getLogger("kafka").setLevel(logging.WARNING)
    try:
        checked = ensure(settings.cdc)
        # The changelog stream the next task starts reads every captured table's topic.
        created = ensure_changelog_topics(settings)
    except (CdcError, KafkaUnavailableError) as err:
        raise TaskFailed(str(err)) from None
    outcome = checked.outcome + (f"; created topics {', '.join(created)}" if created else "")
    log.info("%s", outcome)
    return outcome


def snapshot_table(form: Mapping[str, Any]) -> str:
    """The form's table added to the connector's tables, with an incremental snapshot."""
    from airflow.sdk.exceptions import AirflowSkipException

    from lakehouse.cdc.capture import snapshot_new_table
    from lakehouse.cdc.connector import CdcError
    from lakehouse.core.config import get_settings

    if not form["table"]:
        raise AirflowSkipException("no table asked for: nothing to snapshot")
    try:
        done = snapshot_new_table(get_settings().cdc, form["table"])
    except CdcError as err:
        raise Refused(str(err)) from None
    log.info("%s", done)
    return done


def supervise_changelog(form: Mapping[str, Any]) -> dict[str, Any]:
    from lakehouse.cdc.supervisor import ChangelogSupervisor
    from lakehouse.core.config import get_settings

    return apply_stream_action(ChangelogSupervisor(get_settings()), form["action"])


def check_changelog(done: Mapping[str, Any]) -> dict[str, Any]:
    from lakehouse.cdc.supervisor import ChangelogSupervisor
    from lakehouse.core.config import get_settings

    return check_stream_health(ChangelogSupervisor(get_settings()), done)


def reconcile_changelog(context: Mapping[str, Any], run: RunJob | None = None) -> dict[str, Any]:
    """jobs.cdc_reconcile under the run's id: every captured table's current rows and history
    recomputed from bronze against the stream's, recorded in dq.reconciliation_runs. Fails
    naming each table and kind that differs; skipped while the stream has completed no batch."""
    return run_judge("cdc_reconcile", context, log, run)
