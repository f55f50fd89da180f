"""Keeps change data capture running: the Debezium connector on Kafka Connect and the changelog
stream (jobs/cdc.py); snapshots a newly added table on request."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import Param, dag, get_current_context, task

from dags.support.failure import retry_policy

# lakehouse.speed.supervisor.ACTIONS; not imported, as DAG files import lakehouse only in tasks.
ACTIONS = ["ensure", "start", "stop", "restart"]

DOC = """
### Change data capture

PostgreSQL `shop` → Debezium (a connector on Kafka Connect) → one compacted topic per table
(`shop.public.<table>`) → the changelog stream (`python -m jobs.cdc`) → `bronze.<table>_changes`,
`silver.<table>_current`, `silver.<table>_history`. See docs/cdc.md.

Every 5 minutes (one run at a time) this DAG:

1. **check_form**: the run's parameters (a table asked for must exist and have a primary key).
2. **connector**: registers the connector if Connect does not have it, brings its config in
   step with the settings (keeping tables added here), and checks Connect's REST status of the
   connector and its task: a FAILED one is restarted through the REST API and checked again.
3. **supervise**: starts the changelog stream if it is not running (a detached process,
   pid file `<state>/run/cdc.pid`, log `<state>/run/logs/cdc.log`), as `action` says.
4. **check_lag**: the stream is *stale* when no batch came for `speed.stale_after_seconds`
   while the changelog topics hold records it has not read → it is **restarted** and the task
   fails saying so; otherwise one line with its newest batch and lag.
5. **reconcile** (beside check_lag): every captured table's current rows and history
   recomputed from its bronze changes (`python -m jobs.cdc_reconcile`) and compared row for
   row with the stream's, as of its last completed batch (keys with a change in flight left
   out); one row per table and kind in `dq.reconciliation_runs` (run id `cdc:<run id>`).
   **Fails** naming each table and kind that differs and its first differing keys; skipped
   while the stream has completed no batch.
6. **snapshot**: only with a `table`: adds it to the connector's tables and asks Debezium for
   an incremental snapshot of it (a signal row in `debezium_signal`); its rows go to its topic
   while changes keep streaming.

**Snapshot a new table**: *Trigger DAG* with `table` set (the DAG must be unpaused). A table
that does not exist or has no primary key is refused with one line, and nothing changes.

| action | what it does to the changelog stream |
|---|---|
| `ensure` | start it if it is not running, then check its lag (the schedule's default) |
| `start` | start it (already running: nothing to do), then check its lag |
| `stop` | stop gracefully after the running batch; scheduled runs leave it stopped |
| `restart` | stop, start again, then check its lag |
"""


@dag(
    dag_id="cdc",
    schedule=timedelta(minutes=5),
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    tags=["tributary", "cdc"],
    description="Keeps the connector and the changelog stream running, reconciles its tables "
    "with their recompute from bronze; snapshots a new table",
    doc_md=DOC,
    default_args={"retries": 0, "retry_policy": retry_policy()},
    params={
        "action": Param(
            "ensure",
            type="string",
            enum=ACTIONS,
            title="Changelog stream",
            description="ensure: start it if it is not running (default); start; "
            "stop: graceful, after the running batch; restart",
            values_display={
                "ensure": "ensure: keep it running",
                "start": "start",
                "stop": "stop (graceful)",
                "restart": "restart",
            },
        ),
        "table": Param(
            None,
            type=["null", "string"],
            title="Table to snapshot",
            description="A table of the shop database's captured schema to add to the capture, "
            "with an incremental snapshot of its rows; it must have a primary key. Empty: none",
        ),
    },
)
def cdc() -> None:
    @task(execution_timeout=timedelta(minutes=2))
    def check_form() -> dict[str, Any]:
        from dags.support import cdc_tasks
        from dags.support.run_params import checked_params

        return cdc_tasks.check_form(checked_params(get_current_context()))

    @task(execution_timeout=timedelta(minutes=5))
    def connector(form: Mapping[str, Any]) -> str:
        from dags.support import cdc_tasks

        return cdc_tasks.ensure_connector(form)

    @task(execution_timeout=timedelta(minutes=5))
    def snapshot(form: Mapping[str, Any], _connector: str) -> str:
        from dags.support import cdc_tasks

        return cdc_tasks.snapshot_table(form)

    # Seconds to minutes, never the stream's lifetime: the stream runs outside Airflow.
    @task(execution_timeout=timedelta(minutes=5))
    def supervise(form: Mapping[str, Any], _connector: str) -> dict[str, Any]:
        from dags.support import cdc_tasks

        return cdc_tasks.supervise_changelog(form)

    @task(execution_timeout=timedelta(minutes=10))
    def check_lag(done: Mapping[str, Any]) -> dict[str, Any]:
        from dags.support import cdc_tasks

        return cdc_tasks.check_changelog(done)

    # A Spark job of its own (a minute or so); its write may wait for another reconciliation.
    @task(execution_timeout=timedelta(minutes=20))
    def reconcile(_done: Mapping[str, Any]) -> dict[str, Any]:
        from dags.support import cdc_tasks

        return cdc_tasks.reconcile_changelog(get_current_context())

    # TaskFlow passes the XComs at run time; mypy sees the XComArg placeholders.
    form = check_form()
    running = connector(form)  # type: ignore[arg-type]
    snapshot(form, running)  # type: ignore[arg-type]
    supervised = supervise(form, running)  # type: ignore[arg-type]
    check_lag(supervised)  # type: ignore[arg-type]
    # What the stream wrote is judged whatever its lag: beside check_lag, not after it.
    reconcile(supervised)  # type: ignore[arg-type]


cdc()
