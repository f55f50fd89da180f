"""The running Airflow's REST API (v2), as the integration tests drive it: log in, wait for a
DAG to be parsed, pause or unpause it, trigger a run and poll it to a final state, read task
logs. The `api` fixture (tests/integration/conftest.py) gives a logged-in client."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from lakehouse.core.config import Settings

HTTP_TIMEOUT = 30
# The test Airflow's SQLite lock can keep a request waiting past HTTP_TIMEOUT, or fail it with
# "database is locked" (a 500) after SQLITE_BUSY_SECONDS. Calls that mean the same thing when
# sent twice (reads, pause and unpause, deletes) are sent again; a POST is not, since it could
# trigger a second run.
IDEMPOTENT_RETRIES = Retry(
    total=3,
    backoff_factor=2,
    status_forcelist=frozenset({500}),
    allowed_methods=frozenset({"GET", "HEAD", "PATCH", "PUT", "DELETE"}),
    raise_on_status=False,
)
PARSE_TIMEOUT = 120  # the dag-processor rescans the folder every 15 s
POLL_SECONDS = 3
FINAL_STATES = ("success", "failed")
# A run_after before any scheduled run's. Unpausing a scheduled DAG makes the scheduler create
# the run of its latest interval; it starts a DAG's queued runs in run_after order, one at a
# time (max_active_runs=1), so a manual run triggered with this one goes first instead of
# waiting for that scheduled run. Only for DAGs whose tasks do not read run_after.
BEFORE_SCHEDULED_RUNS = "2000-01-01T00:00:00+00:00"


def request_token(url: str, username: str, password: str) -> requests.Response:
    """The login call itself, whatever its outcome (a test checks that it can fail)."""
    return requests.post(
        f"{url}/auth/token", json={"username": username, "password": password}, timeout=HTTP_TIMEOUT
    )


class Api:
    """The REST API v2, logged in with a bearer token."""

    def __init__(self, url: str, token: str) -> None:
        self.base = f"{url}/api/v2"
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"
        self.session.mount("http://", HTTPAdapter(max_retries=IDEMPOTENT_RETRIES))

    def call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        return self.session.request(method, self.base + path, timeout=HTTP_TIMEOUT, **kwargs)

    def close(self) -> None:
        self.session.close()


def login(url: str, settings: Settings) -> Api:
    """A client logged in as the admin user from the settings."""
    airflow = settings.airflow
    assert airflow.admin_password is not None, "no Airflow admin password: run `make setup`"
    reply = request_token(url, airflow.admin_user, airflow.admin_password.get_secret_value())
    assert reply.status_code == 201, f"login failed: {reply.status_code} {reply.text}"
    return Api(url, reply.json()["access_token"])


def expect_json(reply: requests.Response, *expected: int) -> Any:
    """The reply's JSON body, after asserting its status is one of `expected`."""
    assert reply.status_code in expected, (
        f"{reply.request.method} {reply.url}: {reply.status_code} {reply.text[:2000]}"
    )
    return reply.json()


def wait_until(check: Callable[[], bool], timeout: float, what: str, interval: float = 1) -> None:
    """Poll `check` until it is true; fail after `timeout` seconds, saying what was awaited."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(interval)


def wait_parsed(api: Api, dag_id: str, timeout: float = PARSE_TIMEOUT) -> dict[str, Any]:
    """The DAG as the API sees it, once the dag-processor has parsed the file; fails at once,
    with the stack trace, if the file does not import."""
    deadline = time.monotonic() + timeout
    while True:
        reply = api.call("GET", f"/dags/{dag_id}")
        if reply.status_code == 200 and not reply.json()["is_stale"]:
            dag: dict[str, Any] = reply.json()
            break
        if reply.status_code != 404:
            expect_json(reply, 200)
        errors = [
            e
            for e in expect_json(api.call("GET", "/importErrors"), 200)["import_errors"]
            if dag_id in e["filename"]
        ]
        assert not errors, f"{dag_id} does not import:\n{errors[0].get('stack_trace', errors[0])}"
        assert time.monotonic() < deadline, f"{dag_id} not parsed after {timeout:.0f} s"
        time.sleep(POLL_SECONDS)
    assert not dag["has_import_errors"], f"{dag_id} has import errors"
    return dag


@contextlib.contextmanager
def unpaused(api: Api, dag_id: str) -> Iterator[None]:
    """The DAG unpaused (DAGs are created paused), then put back as it was."""
    was_paused = expect_json(api.call("GET", f"/dags/{dag_id}"), 200)["is_paused"]
    dag = expect_json(api.call("PATCH", f"/dags/{dag_id}", json={"is_paused": False}), 200)
    assert dag["is_paused"] is False
    try:
        yield
    finally:
        expect_json(api.call("PATCH", f"/dags/{dag_id}", json={"is_paused": was_paused}), 200)


def new_run_id() -> str:
    return f"test_{uuid.uuid4().hex[:12]}"


def trigger_run(
    api: Api, dag_id: str, conf: dict[str, Any] | None = None, run_after: str | None = None
) -> dict[str, Any]:
    """Trigger a manual run (with `conf` and `run_after`, if given); the new run as the API
    returns it."""
    run_id = new_run_id()
    body: dict[str, Any] = {"dag_run_id": run_id, "logical_date": None}
    if conf is not None:
        body["conf"] = conf
    if run_after is not None:
        body["run_after"] = run_after
    run: dict[str, Any] = expect_json(api.call("POST", f"/dags/{dag_id}/dagRuns", json=body), 200)
    assert run["dag_run_id"] == run_id
    if conf is not None:
        assert run["conf"] == conf
    return run


def wait_for_run(
    api: Api, dag_id: str, run_id: str, timeout: float
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Poll the run until it succeeds or fails, for `timeout` seconds at most; the run as last
    seen (its state may still be unfinished) and its task instances."""
    path = f"/dags/{dag_id}/dagRuns/{run_id}"
    deadline = time.monotonic() + timeout
    run: dict[str, Any] = expect_json(api.call("GET", path), 200)
    while run["state"] not in FINAL_STATES and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
        run = expect_json(api.call("GET", path), 200)
    tis = expect_json(api.call("GET", f"{path}/taskInstances"), 200)["task_instances"]
    return run, tis


def run_alone(
    api: Api, dag_id: str, run_id: str, timeout: float
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run `run_id`, a manual run of a paused, scheduled DAG (triggered first in line:
    BEFORE_SCHEDULED_RUNS), with no scheduled run beside it; its task instances once they have
    finished, and the run. Unpausing makes the scheduler create the run of the DAG's latest
    interval, which would start as soon as this one ends: the DAG is paused again once every
    task of this run is under way (or skipped: a paused DAG's tasks are not scheduled), so
    that run stays queued, and is marked failed, never run. A running task finishes while its
    DAG is paused, but the scheduler marks the run itself finished only later: the run's state
    here may still be running."""
    path = f"/dags/{dag_id}/dagRuns/{run_id}"

    def tis() -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = expect_json(api.call("GET", f"{path}/taskInstances"), 200)[
            "task_instances"
        ]
        return found

    def all_under_way() -> bool:
        found = tis()
        return bool(found) and all(ti["state"] not in (None, "scheduled") for ti in found)

    with unpaused(api, dag_id):
        wait_until(all_under_way, timeout, f"{dag_id} run {run_id}'s tasks to start")
    # up_for_retry: a retry is not scheduled while the DAG is paused; the test fails on it.
    ended = (*FINAL_STATES, "skipped", "upstream_failed", "up_for_retry")
    wait_until(
        lambda: all(ti["state"] in ended for ti in tis()),
        timeout,
        f"{dag_id} run {run_id}'s tasks to finish",
        interval=POLL_SECONDS,
    )
    end_queued_scheduled_runs(api, dag_id)
    return expect_json(api.call("GET", path), 200), tis()


def end_queued_scheduled_runs(api: Api, dag_id: str) -> None:
    """Mark failed the DAG's scheduled runs that have not started: unpausing a scheduled DAG
    makes the scheduler create the run of its latest interval, which a test that triggers runs
    of its own never needs. Marked, never deleted: a run deleted while the scheduler's loop
    holds it ends that loop with ObjectDeletedError, and the scheduler exits. One that started
    meanwhile is marked failed too, its tasks with it."""
    queued = expect_json(
        api.call(
            "GET", f"/dags/{dag_id}/dagRuns", params={"run_type": "scheduled", "state": "queued"}
        ),
        200,
    )["dag_runs"]
    for scheduled in queued:
        path = f"/dags/{dag_id}/dagRuns/{scheduled['dag_run_id']}"
        expect_json(api.call("PATCH", path, json={"state": "failed"}), 200)


def xcom(api: Api, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
    """The value the task returned (its XCom `return_value`)."""
    path = f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value"
    value = expect_json(api.call("GET", path), 200)["value"]
    # The API returns the stored value as is: JSON text or already a structure.
    return json.loads(value) if isinstance(value, str) else value


def task_states(tis: list[dict[str, Any]]) -> dict[str, str]:
    return {ti["task_id"]: ti["state"] for ti in tis}


def task_log(api: Api, dag_id: str, run_id: str, ti: dict[str, Any]) -> str:
    """The text of a task instance's latest try, or why there is none."""
    if not ti["try_number"]:
        return "(never ran)"
    reply = api.call(
        "GET",
        f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{ti['task_id']}/logs/{ti['try_number']}",
        headers={"Accept": "application/json"},
    )
    if reply.status_code != 200:
        return f"(log unavailable: {reply.status_code} {reply.text[:500]})"
    # Entries are structured events ({"event": ..., ...}) or plain lines when unparseable; a
    # task that ends with a reason logs it as the exit code of its "Task exited" event.
    return "\n".join(
        e
        if isinstance(e, str)
        else " ".join(str(e[k]) for k in ("event", "exit_code") if e.get(k) is not None) or str(e)
        for e in reply.json()["content"]
    )


def error_lines(api: Api, dag_id: str, run_id: str, task_id: str) -> list[str]:
    """The ERROR entries of the task's log (latest try), each as its event and exit code,
    after asserting that no entry carries a stack trace."""
    path = f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}"
    ti = expect_json(api.call("GET", path), 200)
    reply = api.call(
        "GET", f"{path}/logs/{ti['try_number']}", headers={"Accept": "application/json"}
    )
    entries = [e for e in expect_json(reply, 200)["content"] if isinstance(e, dict)]
    traces = [e for e in entries if e.get("error_detail")]
    assert not traces, f"a stack trace in the log: {traces}"
    return [
        " ".join(str(e[k]) for k in ("event", "exit_code") if e.get(k) is not None)
        for e in entries
        if str(e.get("level")).lower() == "error"
    ]


def results_page(api: Api, dag_id: str, run_id: str, task_id: str) -> tuple[str, str]:
    """The task's Results link (its extra link, as the UI shows it) and the page it opens,
    fetched as the logged-in user."""
    path = f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/links"
    links = expect_json(api.call("GET", path), 200)["extra_links"]
    url = links.get("Results")
    assert url, f"{dag_id}.{task_id} has no Results link: {links}"
    page = api.session.get(api.base.removesuffix("/api/v2") + url, timeout=HTTP_TIMEOUT)
    assert page.status_code == 200, f"{url}: {page.status_code} {page.text[:300]}"
    return url, page.text


def task_logs(api: Api, dag_id: str, run_id: str, tis: list[dict[str, Any]]) -> dict[str, str]:
    return {ti["task_id"]: task_log(api, dag_id, run_id, ti) for ti in tis}


def tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.splitlines()[-lines:])


def tasks_report(tis: list[dict[str, Any]], logs: Mapping[str, str], lines: int = 25) -> str:
    """Each task's state and the tail of its log, for a failure message."""
    return "\n".join(
        f"--- {ti['task_id']} ({ti['state']}):\n{tail(logs[ti['task_id']], lines)}" for ti in tis
    )
