"""Keeps the speed layer (jobs/speed_layer.py) running and healthy; start/stop/restart it."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import Param, dag, get_current_context, task

# lakehouse.speed.supervisor.ACTIONS; not imported, as DAG files import lakehouse only in tasks.
ACTIONS = ["ensure", "start", "stop", "restart"]

DOC = """
### Speed layer supervisor

The speed layer is one long-running Spark Structured Streaming application
(`python -m jobs.speed_layer`: Kafka `events` → bronze, silver and the speed views). It runs
as a **detached process** with a pid file (`<state>/run/speed_layer.pid`, log in
`<state>/run/logs/speed_layer.log`), not inside an Airflow task: every run of this DAG takes
seconds to a few minutes, and no worker slot is held for the life of the stream.

Every 5 minutes (one run at a time) this DAG:

1. **supervise**: starts the stream if it is not running (action `ensure`).
2. **check_health**: reads the newest rows of `ops.speed_progress` and Kafka's end offsets.
   After a start it first waits (a few minutes at most) for the first micro-batch.
   - *stale*: no micro-batch for `speed.stale_after_seconds` while records wait in Kafka →
     the stream is **restarted** and the task fails saying so.
   - *lagging*: Kafka lag grew over the last several batches → the task fails (the stream
     is slower than the producers: give Spark more cores or raise `max_offsets_per_trigger`).
   - *slow*: freshness over `speed.freshness_slo_seconds` while records wait → the task fails.
   - *healthy*: one log line with the newest batch, its rate, lag and freshness.

**Start, stop or restart by hand**: *Trigger DAG* (the DAG must be unpaused for any run
to execute) and choose the `action` parameter:

| action | what it does |
|---|---|
| `ensure` | start the stream if it is not running, then check its health (the schedule's default) |
| `start` | start the stream (already running: nothing to do), then check its health |
| `stop` | stop gracefully: the current micro-batch finishes; killed after 2 minutes |
| `restart` | stop, start again, then check its health |

A `stop` is sticky: until a run with `start` or `restart`, the scheduled `ensure` runs leave
the stream stopped (they log why and skip the health check).
"""


@dag(
    dag_id="speed_layer",
    schedule=timedelta(minutes=5),
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    tags=["tributary", "speed"],
    description="Keeps the speed layer stream running and healthy; start/stop/restart it",
    doc_md=DOC,
    params={
        "action": Param(
            "ensure",
            type="string",
            enum=ACTIONS,
            title="Action",
            description=(
                "ensure: start the stream if it is not running (default); start; "
                "stop: graceful, after the current micro-batch; restart"
            ),
            values_display={
                "ensure": "ensure: keep it running",
                "start": "start",
                "stop": "stop (graceful)",
                "restart": "restart",
            },
        )
    },
)
def speed_layer() -> None:
    # Seconds to minutes, never the stream's lifetime: the stream runs outside Airflow.
    @task(execution_timeout=timedelta(minutes=5))
    def supervise() -> dict[str, Any]:
        return apply_action(get_current_context())

    @task(execution_timeout=timedelta(minutes=10))
    def check_health(done: dict[str, Any]) -> dict[str, Any]:
        return assess_stream(done)

    # TaskFlow passes the XCom at run time; mypy sees the XComArg placeholder.
    check_health(supervise())  # type: ignore[arg-type]


# The tasks' logic, callable with a context (tests run it in-process).


def apply_action(context: Mapping[str, Any]) -> dict[str, Any]:
    """The supervise task: do what the run's `action` asks; what was done."""
    from dags.support.run_params import checked_params
    from dags.support.streams import apply_stream_action
    from lakehouse.core.config import get_settings
    from lakehouse.speed.supervisor import SpeedLayerSupervisor

    action = checked_params(context)["action"]
    return apply_stream_action(SpeedLayerSupervisor(get_settings()), action)


def assess_stream(done: Mapping[str, Any]) -> dict[str, Any]:
    """The check_health task: judge the stream the supervise task left running; restart a
    stale one; fail on any verdict but healthy."""
    from dags.support.streams import check_stream_health
    from lakehouse.core.config import get_settings
    from lakehouse.speed.supervisor import SpeedLayerSupervisor

    return check_stream_health(SpeedLayerSupervisor(get_settings()), done)


speed_layer()
