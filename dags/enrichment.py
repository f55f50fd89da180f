"""Keeps the enrichment stream (jobs/enrich.py) running and healthy, and reconciles what it
wrote with its recompute; start/stop/restart it."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import Param, dag, get_current_context, task

from dags.support.failure import retry_policy

# lakehouse.speed.supervisor.ACTIONS; not imported, as DAG files import lakehouse only in tasks.
# and its RESET, which this stream takes.
ACTIONS = ["ensure", "start", "stop", "restart", "reset"]

DOC = """
### Enrichment (stream-table join)

`silver.events` (the speed layer's) joined as of each event's time with
`silver.users_history` and `silver.products_history` (the changelog stream's) by the
enrichment stream (`python -m jobs.enrich`) → `silver.events_enriched`,
`speed.revenue_by_segment`. A dimension change that arrives after events it bears on
corrects them in the next batch (a `corrected` row). See docs/joins.md.

Every 5 minutes (one run at a time) this DAG:

1. **supervise**: starts the stream if it is not running (a detached process, pid file
   `<state>/run/enrich.pid`, log `<state>/run/logs/enrich.log`), as `action` says.
2. **check_health**: the stream is *stale* when no batch came for `speed.stale_after_seconds`
   while silver.events has commits newer than it has read → it is **restarted** and the task
   fails saying so; otherwise one line with its newest batch.
3. **reconcile** (after a healthy check_health; skipped with it after a stop): the enriched
   events and the revenue view against the same events joined again at the last batch's pinned
   history versions (`python -m jobs.enrich_reconcile`). **Fails** naming the first differing
   events and windows; skipped while the stream has completed no batch.

| action | what it does to the enrichment stream |
|---|---|
| `ensure` | start it if it is not running, then check it (the schedule's default) |
| `start` | start it (already running: nothing to do), then check it |
| `stop` | stop gracefully after the running batch; scheduled runs leave it stopped |
| `restart` | stop, start again, then check it |
| `reset` | stop; remove its tables and checkpoint (`jobs.enrich --reset`); start afresh |
"""


@dag(
    dag_id="enrichment",
    schedule=timedelta(minutes=5),
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    tags=["tributary", "joins"],
    description="Keeps the enrichment stream running and reconciles it with its recompute",
    doc_md=DOC,
    default_args={"retries": 0, "retry_policy": retry_policy()},
    params={
        "action": Param(
            "ensure",
            type="string",
            enum=ACTIONS,
            title="Enrichment stream",
            description="ensure: start it if it is not running (default); start; "
            "stop: graceful, after the running batch; restart; reset: stop, remove its tables "
            "and checkpoint, start afresh",
            values_display={
                "ensure": "ensure: keep it running",
                "start": "start",
                "stop": "stop (graceful)",
                "restart": "restart",
                "reset": "reset: rebuild its tables from silver",
            },
        ),
    },
)
def enrichment() -> None:
    # Seconds to minutes, never the stream's lifetime: the stream runs outside Airflow.
    @task(execution_timeout=timedelta(minutes=5))
    def supervise() -> dict[str, Any]:
        from dags.support import enrichment_tasks
        from dags.support.run_params import checked_params

        action = checked_params(get_current_context())["action"]
        return enrichment_tasks.supervise_enrichment(action)

    @task(execution_timeout=timedelta(minutes=10))
    def check_health(done: Mapping[str, Any]) -> dict[str, Any]:
        from dags.support import enrichment_tasks

        return enrichment_tasks.check_enrichment(done)

    # A Spark job of its own: the enriched events joined again. After a healthy check, so a
    # run that starts the stream judges its first batch; skipped with the check after a stop
    # (the reconcile DAG judges a stopped stream).
    @task(execution_timeout=timedelta(minutes=20))
    def reconcile(_done: Mapping[str, Any]) -> dict[str, Any]:
        from dags.support import enrichment_tasks

        return enrichment_tasks.reconcile_enrichment()

    # TaskFlow passes the XComs at run time; mypy sees the XComArg placeholders.
    supervised = supervise()
    check_health(supervised) >> reconcile(supervised)  # type: ignore[arg-type]


enrichment()
