"""The speed_layer DAG, run for real by the running Airflow through its REST API: the API
refuses an unknown action, and a run with `ensure` starts a stopped stream and checks its
health. Then the supervisor its tasks call (lakehouse.speed.supervisor), in this process with
short waits (config `supervisor`): `ensure` restarts a killed stream, `stop` stops it and
holds it down. The tasks' glue (a misspelt parameter refused before anything is done, the
health check skipped after a stop, a held stream left stopped) runs in tests/dags.

The stream it supervises is the real one (the `events` topic into the services' lakehouse),
so the module stops it at the end, whatever happened.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from lakehouse.core.config import Settings
from lakehouse.core.kafka_io import produce_json
from lakehouse.speed.supervisor import SpeedLayerSupervisor, group_members
from tests.integration import airflow_client as af

DAG_ID = "speed_layer"
# A start waits for Spark (15-30 s) and its first micro-batch; a scheduled run may go first.
RUN_TIMEOUT = 600


@pytest.fixture(scope="module")
def supervisor(minio_settings: Settings) -> SpeedLayerSupervisor:
    """The supervisor as the DAG's tasks use it, with short waits: a start is judged after 2 s
    (these tests check which stream runs; the configured check runs in the REST run), a
    stop kills after 60 s. Only the state folder matters besides (pid file, log, stop and hold
    files), and it is the one the Airflow services use: both come from the same environment."""
    waits = {"startup_check_seconds": 2, "stop_timeout_seconds": 60, "poll_seconds": 1}
    return SpeedLayerSupervisor(
        minio_settings.model_copy(
            update={"supervisor": minio_settings.supervisor.model_copy(update=waits)}
        )
    )


@pytest.fixture(scope="module")
def dag_ready(api: af.Api, supervisor: SpeedLayerSupervisor, kafka_up: str) -> Iterator[None]:
    """The DAG parsed; afterwards the stream stopped and its hold put back as it was."""
    af.wait_parsed(api, DAG_ID)
    held = supervisor.held()
    yield
    supervisor.stop()
    if held:
        supervisor.hold_file.write_text(held + "\n")
    else:
        supervisor.hold_file.unlink(missing_ok=True)


def test_unknown_action_is_refused_by_the_api(api: af.Api, dag_ready: None) -> None:
    reply = api.call(
        "POST",
        f"/dags/{DAG_ID}/dagRuns",
        json={"dag_run_id": af.new_run_id(), "logical_date": None, "conf": {"action": "explode"}},
    )
    assert reply.status_code == 400, f"{reply.status_code} {reply.text}"
    detail = reply.json()["detail"]
    assert "Invalid input for param action" in detail and "'explode' is not one of" in detail, (
        detail
    )


def test_ensure_starts_a_stopped_stream(
    api: af.Api, dag_ready: None, supervisor: SpeedLayerSupervisor, minio_settings: Settings
) -> None:
    _wait_no_task_acting(api)
    supervisor.stop()
    supervisor.hold_file.unlink(missing_ok=True)
    assert not supervisor.status().running
    # Records the stream has not seen, so it must commit a micro-batch once it is up.
    marker = uuid.uuid4().hex[:8]
    produce_json(minio_settings, [(f"u-{marker}", _event(marker, i)) for i in range(20)])

    # Triggered first, and first in line: it goes before the scheduled run unpausing creates.
    run_id = _trigger(api, "ensure")
    with af.unpaused(api, DAG_ID):
        states = _assert_success(api, run_id)
    _wait_no_task_acting(api)
    assert states == {"supervise": "success", "check_health": "success"}, states
    now = supervisor.status()
    assert now.running and now.pid is not None and now.started_at is not None, now.describe()
    assert supervisor.proc.pid_file.read_text().strip() == str(now.pid)
    started = af.xcom(api, DAG_ID, run_id, "supervise")
    assert started["pid"] == now.pid, started
    health = af.xcom(api, DAG_ID, run_id, "check_health")
    assert health["status"] == "healthy" and health["batch_id"] is not None, health
    # A progress row written by this very process, not one left by an earlier run.
    assert datetime.fromisoformat(health["last_batch_at"]) >= now.started_at, (health, now)


def test_ensure_restarts_a_killed_stream(dag_ready: None, supervisor: SpeedLayerSupervisor) -> None:
    before = supervisor.status()
    assert before.running and before.pid is not None, "the previous test leaves it running"
    # A start on the running stream (the scheduled run unpausing made may have started it)
    # succeeds and leaves it as it is.
    again = supervisor.apply("start")
    assert again["running"] and again["pid"] == before.pid, again
    assert again["outcome"].startswith("already running:"), again
    assert supervisor.status().pid == before.pid
    os.killpg(before.pid, signal.SIGKILL)  # the driver and its JVM, as a crash would
    af.wait_until(lambda: not supervisor.status().running, 15, "the killed stream to be gone")

    done = supervisor.apply("ensure")
    after = supervisor.status()
    assert done["running"] and done["pid"] == after.pid, done
    assert after.running and after.pid not in (None, before.pid), after.describe()
    assert done["outcome"].startswith(f"started the speed layer: pid {after.pid}"), done


def test_stop_action_stops_the_stream(dag_ready: None, supervisor: SpeedLayerSupervisor) -> None:
    before = supervisor.status()
    assert before.running and before.pid is not None, "the previous test leaves it running"

    done = supervisor.apply("stop")
    assert not done["running"] and "stopped the speed layer" in done["outcome"], done
    assert not supervisor.status().running
    assert not group_members(before.pid), "nothing of it is left, the JVM included"
    # Sticky: a scheduled `ensure` leaves it stopped (tests/dags runs that run's task).
    assert supervisor.held()


def test_make_down_stops_the_stream_airflow_keeps_running(
    dag_ready: None, supervisor: SpeedLayerSupervisor, capsys: pytest.CaptureFixture[str]
) -> None:
    """`make down` stops Airflow, and the stream it supervises must not outlive it: the step of
    `infra.services down` that stops it first, gracefully."""
    from infra.services.__main__ import stop_supervised_stream

    supervisor.hold_file.unlink(missing_ok=True)
    started = supervisor.start()
    assert started.running and started.pid is not None, started.describe()
    stop_supervised_stream(supervisor)
    assert not supervisor.status().running
    assert not group_members(started.pid), "nothing of it is left, the JVM included"
    assert "==> speed layer: stopped" in capsys.readouterr().out


# --- helpers -------------------------------------------------------------------------------


def _event(marker: str, i: int) -> dict[str, Any]:
    now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return {
        "event_id": f"test-speed-dag-{marker}-{i}",
        "event_type": "page_view",
        "user_id": f"u-{marker}",
        "page": "/test/speed-layer-dag",
        "event_time": now,
        "sent_at": now,
    }


def _trigger(api: af.Api, action: str) -> str:
    run = af.trigger_run(api, DAG_ID, {"action": action}, run_after=af.BEFORE_SCHEDULED_RUNS)
    return str(run["dag_run_id"])


def _assert_success(api: af.Api, run_id: str) -> dict[str, str]:
    """Wait for the run to finish; fail with every task's log if it did not succeed."""
    run, tis = af.wait_for_run(api, DAG_ID, run_id, RUN_TIMEOUT)
    if run["state"] != "success":
        report = af.tasks_report(tis, af.task_logs(api, DAG_ID, run_id, tis), lines=30)
        pytest.fail(f"run {run_id} is {run['state']!r}; tasks:\n{report}")
    return af.task_states(tis)


def _wait_no_task_acting(api: af.Api) -> None:
    """Let a task that is already going (of a scheduled run) finish, so it cannot act on the
    stream meanwhile. The DAG is paused: no other task of it is started."""

    def idle() -> bool:
        tis = af.expect_json(
            api.call(
                "GET",
                f"/dags/{DAG_ID}/dagRuns/~/taskInstances",
                params={"state": ["queued", "running"]},
            ),
            200,
        )
        return tis["total_entries"] == 0

    af.wait_until(idle, RUN_TIMEOUT, f"{DAG_ID}'s running tasks to finish")
