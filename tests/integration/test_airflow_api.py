"""The running Airflow, driven through its REST API (v2) the way a user or CI would drive it:
log in, find the platform_health DAG, run it, and see both checks pass."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from lakehouse.config import Settings

DAG_ID = "platform_health"
TASK_IDS = {"check_kafka": "Kafka at ", "check_storage": "storage at "}
PARSE_TIMEOUT = 120  # the dag-processor rescans the folder every 15 s
RUN_TIMEOUT = 180
HTTP_TIMEOUT = 30


def _token(url: str, username: str, password: str) -> requests.Response:
    return requests.post(
        f"{url}/auth/token", json={"username": username, "password": password}, timeout=HTTP_TIMEOUT
    )


class Api:
    """The REST API v2, logged in as the admin user."""

    def __init__(self, url: str, token: str) -> None:
        self.base = f"{url}/api/v2"
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"

    def call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        return self.session.request(method, self.base + path, timeout=HTTP_TIMEOUT, **kwargs)


@pytest.fixture(scope="module")
def api(airflow_up: str, minio_settings: Settings) -> Iterator[Api]:
    airflow = minio_settings.airflow
    assert airflow.admin_password is not None, "no Airflow admin password: run `make setup`"
    reply = _token(airflow_up, airflow.admin_user, airflow.admin_password.get_secret_value())
    assert reply.status_code == 201, f"login failed: {reply.status_code} {reply.text}"
    client = Api(airflow_up, reply.json()["access_token"])
    yield client
    client.session.close()


def _json(reply: requests.Response, *expected: int) -> Any:
    assert reply.status_code in expected, (
        f"{reply.request.method} {reply.url}: {reply.status_code} {reply.text[:2000]}"
    )
    return reply.json()


@pytest.fixture(scope="module")
def parsed_dag(api: Api) -> dict[str, Any]:
    """The DAG as the API sees it, once the dag-processor has parsed the file."""
    deadline = time.monotonic() + PARSE_TIMEOUT
    while True:
        reply = api.call("GET", f"/dags/{DAG_ID}")
        if reply.status_code == 200 and not reply.json()["is_stale"]:
            dag: dict[str, Any] = reply.json()
            break
        if reply.status_code != 404:
            _json(reply, 200)
        errors = [
            e
            for e in _json(api.call("GET", "/importErrors"), 200)["import_errors"]
            if DAG_ID in e["filename"]
        ]
        assert not errors, f"{DAG_ID} does not import:\n{errors[0].get('stack_trace', errors[0])}"
        assert time.monotonic() < deadline, f"{DAG_ID} not parsed after {PARSE_TIMEOUT} s"
        time.sleep(3)
    assert not dag["has_import_errors"], f"{DAG_ID} has import errors"
    return dag


@pytest.fixture
def unpaused_dag(api: Api, parsed_dag: dict[str, Any]) -> Iterator[None]:
    # DAGs are created paused; put it back as it was, so the test leaves no trace.
    was_paused = _json(api.call("GET", f"/dags/{DAG_ID}"), 200)["is_paused"]
    dag = _json(api.call("PATCH", f"/dags/{DAG_ID}", json={"is_paused": False}), 200)
    assert dag["is_paused"] is False
    yield
    _json(api.call("PATCH", f"/dags/{DAG_ID}", json={"is_paused": was_paused}), 200)


def test_wrong_password_is_rejected(airflow_up: str, minio_settings: Settings) -> None:
    reply = _token(airflow_up, minio_settings.airflow.admin_user, f"wrong-{uuid.uuid4().hex}")
    assert reply.status_code == 401, reply.text


def test_api_refuses_anonymous_requests(airflow_up: str) -> None:
    reply = requests.get(f"{airflow_up}/api/v2/dags", timeout=HTTP_TIMEOUT)
    assert reply.status_code in (401, 403), f"anonymous access allowed: {reply.status_code}"


def test_platform_health_dag_is_manual_and_tagged(parsed_dag: dict[str, Any]) -> None:
    assert parsed_dag["timetable_summary"] is None  # schedule=None
    assert {t["name"] for t in parsed_dag["tags"]} == {"tributary", "ops"}


def test_platform_health_run_succeeds(api: Api, unpaused_dag: None) -> None:
    run_id = f"test_{uuid.uuid4().hex[:12]}"
    run = _json(
        api.call(
            "POST", f"/dags/{DAG_ID}/dagRuns", json={"dag_run_id": run_id, "logical_date": None}
        ),
        200,
    )
    assert run["dag_run_id"] == run_id

    deadline = time.monotonic() + RUN_TIMEOUT
    while run["state"] not in ("success", "failed") and time.monotonic() < deadline:
        time.sleep(3)
        run = _json(api.call("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}"), 200)

    tasks = _json(api.call("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances"), 200)
    states = {ti["task_id"]: ti["state"] for ti in tasks["task_instances"]}
    logs = {ti["task_id"]: _log_text(api, run_id, ti) for ti in tasks["task_instances"]}
    report = "\n".join(f"--- {task} ({states[task]}):\n{_tail(log)}" for task, log in logs.items())
    assert run["state"] == "success", f"run {run_id} is {run['state']!r}; tasks:\n{report}"
    assert states == dict.fromkeys(TASK_IDS, "success"), report
    for task, line in TASK_IDS.items():
        assert line in logs[task], f"{task} did not log its result line:\n{_tail(logs[task])}"


def _log_text(api: Api, run_id: str, ti: dict[str, Any]) -> str:
    if not ti["try_number"]:
        return "(never ran)"
    reply = api.call(
        "GET",
        f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{ti['task_id']}/logs/{ti['try_number']}",
        headers={"Accept": "application/json"},
    )
    if reply.status_code != 200:
        return f"(log unavailable: {reply.status_code} {reply.text[:500]})"
    # Entries are structured events ({"event": ..., ...}) or plain lines when unparseable.
    return "\n".join(
        e if isinstance(e, str) else str(e.get("event", e)) for e in reply.json()["content"]
    )


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.splitlines()[-lines:])
