"""The running Airflow, driven through its REST API (v2) the way a user or CI would drive it:
log in, find the platform_health DAG, run it, and see both checks pass."""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from lakehouse.core.config import Settings
from tests.integration.airflow_client import (
    HTTP_TIMEOUT,
    Api,
    request_token,
    tail,
    task_logs,
    task_states,
    tasks_report,
    trigger_run,
    unpaused,
    wait_for_run,
    wait_parsed,
)

DAG_ID = "platform_health"
TASK_IDS = {"check_kafka": "Kafka at ", "check_storage": "storage at "}
RUN_TIMEOUT = 180
LOCK_HELD_SECONDS = 8  # longer than the SQLite driver's default wait, 5 s


@pytest.fixture(scope="module")
def parsed_dag(api: Api) -> dict[str, Any]:
    """The DAG as the API sees it, once the dag-processor has parsed the file."""
    return wait_parsed(api, DAG_ID)


@pytest.fixture
def unpaused_dag(api: Api, parsed_dag: dict[str, Any]) -> Iterator[None]:
    # Put it back as it was, so the test leaves no trace.
    with unpaused(api, DAG_ID):
        yield


def test_wrong_password_is_rejected(airflow_up: str, minio_settings: Settings) -> None:
    reply = request_token(
        airflow_up, minio_settings.airflow.admin_user, f"wrong-{uuid.uuid4().hex}"
    )
    assert reply.status_code == 401, reply.text


def test_api_refuses_anonymous_requests(airflow_up: str) -> None:
    reply = requests.get(f"{airflow_up}/api/v2/dags", timeout=HTTP_TIMEOUT)
    assert reply.status_code in (401, 403), f"anonymous access allowed: {reply.status_code}"


def test_platform_health_dag_is_manual_and_tagged(parsed_dag: dict[str, Any]) -> None:
    assert parsed_dag["timetable_summary"] is None  # schedule=None
    assert {t["name"] for t in parsed_dag["tags"]} == {"tributary", "ops"}


def test_platform_health_run_succeeds(api: Api, unpaused_dag: None) -> None:
    run_id = trigger_run(api, DAG_ID)["dag_run_id"]
    run, tis = wait_for_run(api, DAG_ID, run_id, RUN_TIMEOUT)

    states = task_states(tis)
    logs = task_logs(api, DAG_ID, run_id, tis)
    report = tasks_report(tis, logs)
    assert run["state"] == "success", f"run {run_id} is {run['state']!r}; tasks:\n{report}"
    assert states == dict.fromkeys(TASK_IDS, "success"), report
    for task, line in TASK_IDS.items():
        assert line in logs[task], f"{task} did not log its result line:\n{tail(logs[task])}"


def test_the_demo_unpauses_the_chain_as_the_admin(api: Api) -> None:
    """`make demo` ends with `python -m infra.services chain`: the chain's DAGs unpaused
    through the API. Shown here on a DAG that runs only when triggered (unpausing the chain
    itself would start the stream and an hourly run in the tests' Airflow), put back after."""
    from infra.services.__main__ import unpause_chain

    dag_id = "promote_version"
    wait_parsed(api, dag_id)
    before = api.call("GET", f"/dags/{dag_id}").json()["is_paused"]
    try:
        unpause_chain([dag_id])
        assert api.call("GET", f"/dags/{dag_id}").json()["is_paused"] is False
    finally:
        api.call("PATCH", f"/dags/{dag_id}", json={"is_paused": before})


def test_a_request_waits_for_the_database_lock_instead_of_failing(api: Api) -> None:
    """SQLite has one writer at a time. A writer holding its lock longer than the driver's
    default wait (5 s), as a busy scheduler does, must delay an API request, not fail it with
    "database is locked" (a 500)."""
    from infra.services.airflow import Airflow
    from infra.services.base import Context
    from lakehouse.core.config import get_settings
    from lakehouse.core.paths import state_dir

    dag_id = "promote_version"
    wait_parsed(api, dag_id)
    before = api.call("GET", f"/dags/{dag_id}").json()["is_paused"]
    database = Airflow(Context(settings=get_settings(), state=state_dir())).database()
    holder = sqlite3.connect(database, timeout=60, check_same_thread=False)
    try:
        assert holder.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        holder.execute("BEGIN IMMEDIATE")  # the write lock, as a scheduler's transaction holds it
        release = threading.Timer(LOCK_HELD_SECONDS, holder.commit)
        release.start()
        started = time.monotonic()
        reply = api.call("PATCH", f"/dags/{dag_id}", json={"is_paused": not before})
        waited = time.monotonic() - started
        release.join()
        assert reply.status_code == 200, f"{reply.status_code} {reply.text[:500]}"
        assert waited >= LOCK_HELD_SECONDS - 1, f"did not wait for the lock ({waited:.1f} s)"
    finally:
        holder.close()
        api.call("PATCH", f"/dags/{dag_id}", json={"is_paused": before})
