"""One shape for the DAGs that keep a detached stream running (dags/commerce.py,
dags/stream_joins.py): every 5 minutes, one run at a time, `supervise` applies the run's
action to the stream, `check_health` judges it (restarting a stale one), and `reconcile`,
after the health check, runs the stream's judge (jobs.joins_reconcile --join <name>),
recorded in dq.reconciliation_runs under the run's id."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from importlib import import_module
from typing import TYPE_CHECKING, Any

from airflow.sdk import Param, dag, get_current_context, task

from .failure import retry_policy

if TYPE_CHECKING:
    from lakehouse.speed.supervisor import StreamSupervisor

# lakehouse.speed.supervisor.ACTIONS; not imported, as DAG files import lakehouse only in tasks.
ACTIONS = ["ensure", "start", "stop", "restart"]
RESET = "reset"  # for a stream whose job takes --reset (lakehouse.speed.supervisor.RESET)

ACTION_TABLE = """
| action | what it does to the stream |
|---|---|
| `ensure` | start it if it is not running, then check it (the schedule's default) |
| `start` | start it (already running: nothing to do), then check it |
| `stop` | stop gracefully after the running batch; scheduled runs leave it stopped |
| `restart` | stop, start again, then check it |
"""
RESET_ROW = (
    "| `reset` | stop, remove its tables and checkpoints (its job's `--reset`), start again: "
    "it reads its inputs afresh, then check it |\n"
)


def supervisor_of(path: str) -> StreamSupervisor:
    """The supervisor class named "module:Class", built with the settings."""
    from lakehouse.core.config import get_settings

    module, name = path.split(":")
    supervisor: StreamSupervisor = getattr(import_module(module), name)(get_settings())
    return supervisor


def supervised_stream_dag(
    dag_id: str,
    *,
    title: str,
    supervisor: str,
    judge: str,
    description: str,
    doc_md: str,
    resettable: bool = False,
) -> Any:
    """The DAG keeping the stream `supervisor` ("module:Class") names running and judged;
    `resettable`: its form offers a reset too."""
    log = logging.getLogger(f"tributary.dags.{dag_id}")
    shown = {
        "ensure": "ensure: keep it running",
        "start": "start",
        "stop": "stop (graceful)",
        "restart": "restart",
    }
    if resettable:
        shown[RESET] = "reset: rebuild its tables from its inputs"

    @dag(
        dag_id=dag_id,
        schedule=timedelta(minutes=5),
        start_date=datetime(2026, 1, 1, tzinfo=UTC),
        catchup=False,
        max_active_runs=1,
        tags=["tributary", "joins"],
        description=description,
        doc_md=doc_md + ACTION_TABLE + (RESET_ROW if resettable else ""),
        default_args={"retries": 0, "retry_policy": retry_policy()},
        params={
            "action": Param(
                "ensure",
                type="string",
                enum=list(shown),
                title=title,
                description="ensure: start it if it is not running (default); start; "
                "stop: graceful, after the running batch; restart"
                + ("; reset: stop, remove its tables, start afresh" if resettable else ""),
                values_display=shown,
            ),
        },
    )
    def supervised() -> None:
        # Seconds to minutes, never the stream's lifetime: the stream runs outside Airflow.
        @task(execution_timeout=timedelta(minutes=5))
        def supervise() -> dict[str, Any]:
            from .run_params import checked_params
            from .streams import apply_stream_action

            action = checked_params(get_current_context())["action"]
            return apply_stream_action(supervisor_of(supervisor), action)

        @task(execution_timeout=timedelta(minutes=10))
        def check_health(done: Mapping[str, Any]) -> dict[str, Any]:
            from .streams import check_stream_health

            return check_stream_health(supervisor_of(supervisor), done)

        # A Spark job of its own: the stream's output recomputed from its inputs. After a
        # healthy check, so a run that starts the stream judges its first batch; skipped with
        # the check after a stop (the reconcile DAG judges a stopped stream).
        @task(execution_timeout=timedelta(minutes=20))
        def reconcile(_done: Mapping[str, Any]) -> dict[str, Any]:
            from .judges import run_judge

            return run_judge("joins_reconcile", get_current_context(), log, args=["--join", judge])

        # TaskFlow passes the XComs at run time; mypy sees the XComArg placeholders.
        done = supervise()
        check_health(done) >> reconcile(done)  # type: ignore[arg-type]

    return supervised()
