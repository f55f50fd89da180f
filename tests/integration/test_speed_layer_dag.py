"""The speed_layer DAG, run for real by the running Airflow through its REST API: it starts a
stopped stream, restarts a killed one, stops it on request, and refuses an unknown action.

The stream it supervises is the real one (the `events` topic into the services' lakehouse),
so the module stops it at the end, whatever happened.
"""

from __future__ import annotations

import json
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
    # Only the state folder matters here (pid file, log, stop and hold files), and it is the
    # one the Airflow services use: both come from the same environment.
    return SpeedLayerSupervisor(minio_settings)


@pytest.fixture(scope="module")
def dag_ready(api: af.Api, supervisor: SpeedLayerSupervisor, kafka_up: str) -> Iterator[None]:
    """The DAG parsed and unpaused, the stream stopped; afterwards all put back, stream stopped."""
    af.wait_parsed(api, DAG_ID)
    held = supervisor.held()
    with af.unpaused(api, DAG_ID):
        yield
    # A queued run does not start while the DAG is paused; only a running one can act.
    _wait_no_active_runs(api, states=("running",))
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
    _wait_no_active_runs(api)
    supervisor.stop()
    supervisor.hold_file.unlink(missing_ok=True)
    assert not supervisor.status().running
    # Records the stream has not seen, so it must commit a micro-batch once it is up.
    marker = uuid.uuid4().hex[:8]
    produce_json(minio_settings, [(f"u-{marker}", _event(marker, i)) for i in range(20)])

    run_id = _trigger(api, "ensure")
    _assert_success(api, run_id)
    now = supervisor.status()
    assert now.running and now.pid is not None and now.started_at is not None, now.describe()
    assert supervisor.proc.pid_file.read_text().strip() == str(now.pid)
    started = _xcom(api, run_id, "supervise")
    assert started["pid"] == now.pid, started
    health = _xcom(api, run_id, "check_health")
    assert health["status"] == "healthy" and health["batch_id"] is not None, health
    # A progress row written by this very process, not one left by an earlier run.
    assert datetime.fromisoformat(health["last_batch_at"]) >= now.started_at, (health, now)


def test_ensure_restarts_a_killed_stream(
    api: af.Api, dag_ready: None, supervisor: SpeedLayerSupervisor
) -> None:
    before = supervisor.status()
    assert before.running and before.pid is not None, "the previous test leaves it running"
    os.killpg(before.pid, signal.SIGKILL)  # the driver and its JVM, as a crash would
    af.wait_until(lambda: not supervisor.status().running, 15, "the killed stream to be gone")

    run_id = _trigger(api, "ensure")
    _assert_success(api, run_id)
    after = supervisor.status()
    assert after.running and after.pid not in (None, before.pid), after.describe()
    assert _xcom(api, run_id, "supervise")["pid"] == after.pid


def test_a_misspelt_parameter_fails_the_run_and_changes_nothing(
    api: af.Api, dag_ready: None, supervisor: SpeedLayerSupervisor
) -> None:
    before = supervisor.status()
    assert before.running and before.pid is not None, "the previous test leaves it running"

    run_id = str(af.trigger_run(api, DAG_ID, conf={"actoin": "stop"})["dag_run_id"])
    run, tis = af.wait_for_run(api, DAG_ID, run_id, RUN_TIMEOUT)
    assert run["state"] == "failed", af.task_states(tis)
    assert af.task_states(tis)["supervise"] == "failed", af.task_states(tis)
    [supervise] = [ti for ti in tis if ti["task_id"] == "supervise"]
    log = af.task_log(api, DAG_ID, run_id, supervise)
    assert "unknown parameter 'actoin' (did you mean 'action'?)" in log, af.tail(log)
    after = supervisor.status()
    assert after.running and after.pid == before.pid, after.describe()


def test_stop_action_stops_the_stream(
    api: af.Api, dag_ready: None, supervisor: SpeedLayerSupervisor
) -> None:
    before = supervisor.status()
    assert before.running and before.pid is not None, "the previous test leaves it running"

    run_id = _trigger(api, "stop")
    states = _assert_success(api, run_id)
    assert states == {"supervise": "success", "check_health": "skipped"}, states
    assert not supervisor.status().running
    assert not group_members(before.pid), "nothing of it is left, the JVM included"
    assert "stopped the speed layer" in _xcom(api, run_id, "supervise")["outcome"]
    # Sticky: a scheduled `ensure` leaves it stopped.
    assert supervisor.held()


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
    return str(af.trigger_run(api, DAG_ID, conf={"action": action})["dag_run_id"])


def _assert_success(api: af.Api, run_id: str) -> dict[str, str]:
    """Wait for the run to finish; fail with every task's log if it did not succeed."""
    run, tis = af.wait_for_run(api, DAG_ID, run_id, RUN_TIMEOUT)
    if run["state"] != "success":
        report = af.tasks_report(tis, af.task_logs(api, DAG_ID, run_id, tis), lines=30)
        pytest.fail(f"run {run_id} is {run['state']!r}; tasks:\n{report}")
    return af.task_states(tis)


def _xcom(api: af.Api, run_id: str, task_id: str) -> dict[str, Any]:
    path = f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value"
    value = af.expect_json(api.call("GET", path), 200)["value"]
    # The API returns the stored value as is: JSON text or already a structure.
    return json.loads(value) if isinstance(value, str) else value


def _wait_no_active_runs(api: af.Api, states: tuple[str, ...] = ("queued", "running")) -> None:
    """Let a scheduled run that is already going finish, so it cannot interfere."""

    def idle() -> bool:
        runs = af.expect_json(
            api.call("GET", f"/dags/{DAG_ID}/dagRuns", params={"state": states}), 200
        )
        return runs["total_entries"] == 0

    af.wait_until(idle, RUN_TIMEOUT, f"{DAG_ID} runs to finish")
