"""What a DAG that keeps a detached stream running does with its supervisor
(lakehouse.speed.supervisor.StreamSupervisor): apply the run's action, then judge the stream,
restarting a stale one. Shared by the speed_layer and cdc DAGs."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .failure import Refused, TaskFailed

if TYPE_CHECKING:
    from lakehouse.speed.supervisor import Action, StreamSupervisor

log = logging.getLogger("tributary.dags.streams")


def apply_stream_action(supervisor: StreamSupervisor, action: Action) -> dict[str, Any]:
    """Start, stop or restart the stream as `action` asks; what was done (the XCom)."""
    from lakehouse.speed.supervisor import SupervisorError

    try:
        done = supervisor.apply(action)
    except SupervisorError as err:
        raise Refused(str(err)) from None
    log.info("%s", done["outcome"])
    return done


def check_stream_health(supervisor: StreamSupervisor, done: Mapping[str, Any]) -> dict[str, Any]:
    """Judge the stream the action left running; restart a stale one; fail on any verdict
    but healthy (a new stream first gets its first_batch_timeout for a first batch)."""
    from airflow.sdk.exceptions import AirflowSkipException

    from lakehouse.speed.supervisor import SupervisorError

    if not done["running"]:
        raise AirflowSkipException(f"nothing to check: {done['outcome']}")
    # kafka-python narrates every connection at INFO; keep the verdict line readable.
    logging.getLogger("kafka").setLevel(logging.WARNING)
    try:
        health = supervisor.assess()
    except SupervisorError as err:
        raise Refused(str(err)) from None
    title = supervisor.stream.title
    if health.status == "stale":
        after = supervisor.restart()
        raise TaskFailed(
            f"{health.message}. Restarted {title} (new pid {after.pid}); "
            f"see {after.log_file} if it happens again"
        )
    if health.status in ("lagging", "slow"):
        raise TaskFailed(health.message)
    if health.status == "starting" and health.records_waiting:
        raise TaskFailed(
            f"{health.message}: no micro-batch committed within "
            f"{supervisor.settings.supervisor.first_batch_timeout_seconds:.0f} s of the start; "
            f"see {supervisor.status().log_file}"
        )
    log.info("%s", health.message)
    at = health.last_batch_at
    return {
        "status": health.status,
        "message": health.message,
        "batch_id": health.batch_id,
        "last_batch_at": at.isoformat() if at else None,
        "records_waiting": health.records_waiting,
    }
