"""Service lifecycle errors are one clear line with a remedy, never a traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.services.airflow import Airflow
from infra.services.base import Context
from infra.services.kafka import Kafka
from infra.services.minio import Minio
from lakehouse.core.config import load_settings
from lakehouse.core.processes import ServiceError

REPO = Path(__file__).parents[2]


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port some other program is listening on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def context(tmp_path: Path, **services: int) -> Context:
    env = {**os.environ, "TRIBUTARY_STATE": str(tmp_path / "state")}
    env.update({f"TRIBUTARY__SERVICES__{k.upper()}": str(v) for k, v in services.items()})
    return Context(settings=load_settings(profile="local", environ=env), state=tmp_path / "state")


def test_kafka_port_in_use_is_refused_with_the_setting_to_change(
    tmp_path: Path, busy_port: int
) -> None:
    kafka = Kafka(context(tmp_path, kafka_port=busy_port))
    with pytest.raises(ServiceError) as caught:
        kafka.start()
    message = str(caught.value)
    assert f"127.0.0.1:{busy_port} is already in use" in message
    assert "TRIBUTARY__SERVICES__KAFKA_PORT" in message
    assert "\n" not in message
    assert not kafka.running()


def test_minio_port_in_use_is_refused(tmp_path: Path, busy_port: int) -> None:
    minio = Minio(context(tmp_path, minio_port=busy_port))
    with pytest.raises(ServiceError, match=r"already in use.*TRIBUTARY__SERVICES__MINIO_PORT"):
        minio.start()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_airflow_component_is_restarted_only_when_it_is_not_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Airflow.restart_component refuses a component whose pid file names a live process,
    and fails with the end of its log when the one it starts exits before Airflow answers."""
    airflow = Airflow(context(tmp_path, airflow_port=free_port()))
    scheduler = airflow.proc("airflow-scheduler")
    scheduler.pid_file.parent.mkdir(parents=True)
    scheduler.pid_file.write_text(f"{os.getpid()}\n")
    with pytest.raises(ServiceError, match="airflow-scheduler is running"):
        airflow.restart_component("airflow-scheduler")

    scheduler.pid_file.unlink()
    airflow.data.mkdir(parents=True)
    monkeypatch.setattr(Airflow, "env", lambda self: dict(os.environ))
    monkeypatch.setattr("infra.services.airflow.airflow_bin", lambda: "false")
    with pytest.raises(ServiceError, match=r"airflow-scheduler exited while waiting.*log"):
        airflow.restart_component("airflow-scheduler", timeout=30)


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "infra.services", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env or dict(os.environ),
        timeout=120,
    )


def test_the_airflow_cli_runs_with_our_airflows_settings() -> None:
    # A bare `airflow` would read ~/airflow and its own (empty) database. Without the AIRFLOW_*
    # variables tests/dags' airflow_home fixture leaves set (its unit test mode prints a line).
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    result = run_cli("airflow", "config", "get-value", "core", "dags_folder", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(REPO / "dags")


@pytest.mark.slow  # two Airflow CLI runs
def test_a_wait_on_the_database_lock_kills_neither_the_scheduler_nor_a_task() -> None:
    """Airflow itself reads them: the threshold past which a scheduler counts as dead is longer
    than a heartbeat's wait for SQLite's lock plus a heartbeat's interval, and a task's call
    to the execution API waits longer than the lock's wait before it gives up."""
    from infra.services.airflow import SQLITE_BUSY_SECONDS

    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}

    def setting(section: str, key: str) -> float:
        result = run_cli("airflow", "config", "get-value", section, key, env=env)
        assert result.returncode == 0, result.stderr
        return float(result.stdout.strip())

    heartbeat_seconds = 5  # [scheduler] scheduler_heartbeat_sec, Airflow's default
    dead_after = setting("scheduler", "scheduler_health_check_threshold")
    assert dead_after > SQLITE_BUSY_SECONDS + heartbeat_seconds
    assert setting("workers", "execution_api_timeout") > SQLITE_BUSY_SECONDS


def test_unknown_service_name_is_a_usage_error() -> None:
    result = run_cli("up", "redis")
    assert result.returncode == 2
    assert (
        "unknown service 'redis'; choose from kafka, postgres, connect, minio, airflow"
        in result.stderr
    )
    assert "Traceback" not in result.stderr


def test_port_in_use_through_the_cli_is_one_line(tmp_path: Path, busy_port: int) -> None:
    env = {
        **os.environ,
        "TRIBUTARY_STATE": str(tmp_path / "state"),
        "TRIBUTARY__SERVICES__KAFKA_PORT": str(busy_port),
        "TRIBUTARY__SERVICES__KAFKA_CONTROLLER_PORT": str(busy_port),
    }
    result = run_cli("up", "kafka", env=env)
    assert result.returncode == 1
    assert result.stderr.startswith("error: kafka: port 127.0.0.1:")
    assert "Traceback" not in result.stderr


def test_bad_config_through_the_cli_is_a_clear_error() -> None:
    env = {**os.environ, "TRIBUTARY__SERVICES__KAFKA_PORT": "ninety"}
    result = run_cli("status", env=env)
    assert result.returncode == 1
    assert "services.kafka_port: Input should be a valid integer" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_java_is_reported_with_what_to_install(tmp_path: Path) -> None:
    from infra.bootstrap import SetupError, java_home

    saved = dict(os.environ)
    try:
        os.environ["JAVA_HOME"] = str(tmp_path / "no-jdk")
        os.environ["PATH"] = str(tmp_path)  # no java on it
        with pytest.raises(SetupError, match=r"Java 17 or newer is needed.*apt-get install"):
            java_home()
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_unknown_bootstrap_step_is_a_usage_error() -> None:
    result = subprocess.run(
        [sys.executable, "infra/bootstrap.py", "everything"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert "unknown step 'everything'" in result.stderr


def test_a_kraft_cluster_id_never_reads_as_an_option() -> None:
    """One URL-safe base64 UUID in 64 begins with "-", which kafka-storage's command line takes
    for an option: the start failed once in 64 fresh states."""
    import base64

    from infra.services.kafka import new_cluster_id

    ids = [new_cluster_id() for _ in range(3000)]
    assert [i for i in ids if i.startswith("-")] == []
    assert {len(i) for i in ids} == {22}
    assert {len(base64.urlsafe_b64decode(i + "==")) for i in ids} == {16}


def test_make_test_records_the_services_start_status_when_the_start_fails(
    tmp_path: Path,
) -> None:
    """The tests wait for the start's status file (tests/conftest.py wait_for_start): it must be
    written when the start fails too, under the recipe's `bash -eu -o pipefail`."""
    import re
    import subprocess

    from lakehouse.core.paths import REPO_ROOT

    [line] = [
        line
        for line in (REPO_ROOT / "Makefile").read_text().splitlines()
        if "infra.services up --record" in line
    ]
    group = re.search(r"\{ .* \} &", line)
    assert group is not None, line
    log, status = tmp_path / "start.log", tmp_path / "start.status"
    script = (
        group.group(0)
        .replace("$(TEST_ENV) $(PY) -m infra.services up --record $(RECORD)", "sh -c 'exit 3'")
        .replace("$(STARTING_LOG)", str(log))
        .replace("$(STARTED)", str(status))
        .replace("$$", "$")
    )
    assert "$(" not in script, script
    subprocess.run(["bash", "-eu", "-o", "pipefail", "-c", f"{script} wait"], check=True)
    assert status.read_text().strip() == "3"


def test_asset_events_a_deleted_lakehouse_left_in_airflow_are_forgotten(tmp_path: Path) -> None:
    """The tests' Airflow outlives each run's lakehouse (infra/test_env.py fresh_state): its
    asset events, which name that lakehouse's batch runs, go with it, and what they queued."""
    import sqlite3

    from infra.services.airflow import ASSET_EVENT_TABLES, forget_asset_events

    database = tmp_path / "airflow.db"
    with sqlite3.connect(database) as db:  # the columns that matter of Airflow's tables
        db.execute("CREATE TABLE asset_event (id INTEGER PRIMARY KEY, source_run_id TEXT)")
        db.execute("CREATE TABLE dagrun_asset_event (dag_run_id INTEGER, event_id INTEGER)")
        db.execute("CREATE TABLE asset_alias_asset_event (alias_id INTEGER, event_id INTEGER)")
        db.execute("CREATE TABLE asset_dag_run_queue (asset_id INTEGER, target_dag_id TEXT)")
        db.execute("CREATE TABLE dag_run (id INTEGER PRIMARY KEY, run_id TEXT)")
        db.executemany("INSERT INTO asset_event VALUES (?, ?)", [(1, "test_a"), (2, "test_b")])
        db.execute("INSERT INTO dagrun_asset_event VALUES (7, 1)")
        db.execute("INSERT INTO asset_dag_run_queue VALUES (1, 'reconcile')")
        db.execute("INSERT INTO dag_run VALUES (7, 'asset_triggered__1')")
    assert forget_asset_events(database) == 2
    with sqlite3.connect(database) as db:
        rows = {
            t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in (*ASSET_EVENT_TABLES, "dag_run")
        }
        assert rows == {**dict.fromkeys(ASSET_EVENT_TABLES, 0), "dag_run": 1}  # runs stay


def test_runs_a_failed_test_run_left_unfinished_in_airflow_are_ended(tmp_path: Path) -> None:
    """A run queued or running when a test run ended (its test failed first) is marked failed
    with its tasks that had not ended, so that no later test's unpause starts it, and a DAG it
    left unpaused is paused; finished runs and tasks are left as they were."""
    import sqlite3

    from infra.services.airflow import pause_dags_and_end_unfinished_runs

    database = tmp_path / "airflow.db"
    with sqlite3.connect(database) as db:  # the columns that matter of Airflow's tables
        db.execute("CREATE TABLE dag (dag_id TEXT, is_paused BOOLEAN)")
        db.executemany("INSERT INTO dag VALUES (?, ?)", [("commerce", 0), ("cdc", 1)])
        db.execute("CREATE TABLE dag_run (dag_id TEXT, run_id TEXT, state TEXT)")
        db.execute(
            "CREATE TABLE task_instance (dag_id TEXT, run_id TEXT, task_id TEXT, state TEXT)"
        )
        db.executemany(
            "INSERT INTO dag_run VALUES (?, ?, ?)",
            [
                ("commerce", "left", "queued"),
                ("commerce", "done", "success"),
                ("cdc", "on", "running"),
            ],
        )
        db.executemany(
            "INSERT INTO task_instance VALUES (?, ?, ?, ?)",
            [
                ("commerce", "left", "supervise", None),
                ("commerce", "done", "supervise", "success"),
                ("cdc", "on", "capture", "success"),
                ("cdc", "on", "reconcile", "running"),
            ],
        )
    assert pause_dags_and_end_unfinished_runs(database) == 2
    with sqlite3.connect(database) as db:
        runs = dict(db.execute("SELECT run_id, state FROM dag_run").fetchall())
        paused = dict(db.execute("SELECT dag_id, is_paused FROM dag").fetchall())
        tasks = {
            (run, task): state
            for run, task, state in db.execute("SELECT run_id, task_id, state FROM task_instance")
        }
    assert runs == {"left": "failed", "done": "success", "on": "failed"}
    assert paused == {"commerce": 1, "cdc": 1}
    assert tasks == {
        ("left", "supervise"): "failed",
        ("done", "supervise"): "success",
        ("on", "capture"): "success",
        ("on", "reconcile"): "failed",
    }
