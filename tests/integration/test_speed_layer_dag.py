"""The speed_layer DAG, run for real by the running Airflow through its REST API: it starts a
stopped stream, restarts a killed one, stops it on request, and refuses an unknown action.

The stream it supervises is the real one (the `events` topic into the services' lakehouse),
so the module stops it at the end, whatever happened.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from lakehouse.config import Settings
from lakehouse.kafka_io import produce_json
from lakehouse.supervisor import SpeedLayerSupervisor, group_members
from tests.integration.test_airflow_api import Api, _json, _token

DAG_ID = "speed_layer"
PARSE_TIMEOUT = 120  # the dag-processor rescans the folder every 15 s
# A start waits for Spark (15-30 s) and its first micro-batch; a scheduled run may go first.
RUN_TIMEOUT = 600


@pytest.fixture(scope="module")
def api(airflow_up: str, minio_settings: Settings) -> Iterator[Api]:
    airflow = minio_settings.airflow
    assert airflow.admin_password is not None, "no Airflow admin password: run `make setup`"
    reply = _token(airflow_up, airflow.admin_user, airflow.admin_password.get_secret_value())
    assert reply.status_code == 201, f"login failed: {reply.status_code} {reply.text}"
    client = Api(airflow_up, reply.json()["access_token"])
    yield client
    client.session.close()


@pytest.fixture(scope="module")
def supervisor(minio_settings: Settings) -> SpeedLayerSupervisor:
    # Only the state folder matters here (pid file, log, stop and hold files), and it is the
    # one the Airflow services use: both come from the same environment.
    return SpeedLayerSupervisor(minio_settings)


@pytest.fixture(scope="module")
def dag_ready(api: Api, supervisor: SpeedLayerSupervisor, kafka_up: str) -> Iterator[None]:
    """The DAG parsed and unpaused, the stream stopped; afterwards all put back, stream stopped."""
    _wait_parsed(api)
    was_paused = _json(api.call("GET", f"/dags/{DAG_ID}"), 200)["is_paused"]
    held = supervisor.held()
    _json(api.call("PATCH", f"/dags/{DAG_ID}", json={"is_paused": False}), 200)
    try:
        yield
    finally:
        _json(api.call("PATCH", f"/dags/{DAG_ID}", json={"is_paused": was_paused}), 200)
        # A queued run does not start while the DAG is paused; only a running one can act.
        _wait_no_active_runs(api, states=("running",))
        supervisor.stop()
        if held:
            supervisor.hold_file.write_text(held + "\n")
        else:
            supervisor.hold_file.unlink(missing_ok=True)


def test_unknown_action_is_refused_by_the_api(api: Api, dag_ready: None) -> None:
    reply = api.call(
        "POST",
        f"/dags/{DAG_ID}/dagRuns",
        json={"dag_run_id": _run_id(), "logical_date": None, "conf": {"action": "explode"}},
    )
    assert reply.status_code == 400, f"{reply.status_code} {reply.text}"
    detail = reply.json()["detail"]
    assert "Invalid input for param action" in detail and "'explode' is not one of" in detail, (
        detail
    )


def test_ensure_starts_a_stopped_stream(
    api: Api, dag_ready: None, supervisor: SpeedLayerSupervisor, minio_settings: Settings
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
    api: Api, dag_ready: None, supervisor: SpeedLayerSupervisor
) -> None:
    before = supervisor.status()
    assert before.running and before.pid is not None, "the previous test leaves it running"
    os.killpg(before.pid, signal.SIGKILL)  # the driver and its JVM, as a crash would
    _wait(lambda: not supervisor.status().running, 15, "the killed stream to be gone")

    run_id = _trigger(api, "ensure")
    _assert_success(api, run_id)
    after = supervisor.status()
    assert after.running and after.pid not in (None, before.pid), after.describe()
    assert _xcom(api, run_id, "supervise")["pid"] == after.pid


def test_stop_action_stops_the_stream(
    api: Api, dag_ready: None, supervisor: SpeedLayerSupervisor
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


def _run_id() -> str:
    return f"test_{uuid.uuid4().hex[:12]}"


def _trigger(api: Api, action: str) -> str:
    run_id = _run_id()
    body = {"dag_run_id": run_id, "logical_date": None, "conf": {"action": action}}
    run = _json(api.call("POST", f"/dags/{DAG_ID}/dagRuns", json=body), 200)
    assert run["conf"] == {"action": action}
    return run_id


def _assert_success(api: Api, run_id: str) -> dict[str, str]:
    """Wait for the run to finish; fail with every task's log if it did not succeed."""
    deadline = time.monotonic() + RUN_TIMEOUT
    run = _json(api.call("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}"), 200)
    while run["state"] not in ("success", "failed") and time.monotonic() < deadline:
        time.sleep(3)
        run = _json(api.call("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}"), 200)
    tis = _json(api.call("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances"), 200)
    states = {ti["task_id"]: ti["state"] for ti in tis["task_instances"]}
    if run["state"] != "success":
        logs = "\n".join(
            f"--- {ti['task_id']} ({ti['state']}):\n{_log_tail(api, run_id, ti)}"
            for ti in tis["task_instances"]
        )
        pytest.fail(f"run {run_id} is {run['state']!r}; tasks:\n{logs}")
    return states


def _xcom(api: Api, run_id: str, task_id: str) -> dict[str, Any]:
    path = f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value"
    value = _json(api.call("GET", path), 200)["value"]
    # The API returns the stored value as is: JSON text or already a structure.
    return json.loads(value) if isinstance(value, str) else value


def _log_tail(api: Api, run_id: str, ti: dict[str, Any], lines: int = 30) -> str:
    if not ti["try_number"]:
        return "(never ran)"
    reply = api.call(
        "GET",
        f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{ti['task_id']}/logs/{ti['try_number']}",
        headers={"Accept": "application/json"},
    )
    if reply.status_code != 200:
        return f"(log unavailable: {reply.status_code} {reply.text[:500]})"
    text = "\n".join(
        e if isinstance(e, str) else str(e.get("event", e)) for e in reply.json()["content"]
    )
    return "\n".join(text.splitlines()[-lines:])


def _wait_parsed(api: Api) -> None:
    deadline = time.monotonic() + PARSE_TIMEOUT
    while True:
        reply = api.call("GET", f"/dags/{DAG_ID}")
        if reply.status_code == 200 and not reply.json()["is_stale"]:
            assert not reply.json()["has_import_errors"], f"{DAG_ID} has import errors"
            return
        errors = [
            e
            for e in _json(api.call("GET", "/importErrors"), 200)["import_errors"]
            if DAG_ID in e["filename"]
        ]
        assert not errors, f"{DAG_ID} does not import:\n{errors[0].get('stack_trace', errors[0])}"
        assert time.monotonic() < deadline, f"{DAG_ID} not parsed after {PARSE_TIMEOUT} s"
        time.sleep(3)


def _wait_no_active_runs(api: Api, states: tuple[str, ...] = ("queued", "running")) -> None:
    """Let a scheduled run that is already going finish, so it cannot interfere."""

    def idle() -> bool:
        runs = _json(api.call("GET", f"/dags/{DAG_ID}/dagRuns", params={"state": states}), 200)
        return runs["total_entries"] == 0

    _wait(idle, RUN_TIMEOUT, f"{DAG_ID} runs to finish")


def _wait(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(1)
