"""Airflow 3 on this machine: SQLite, LocalExecutor, the API server on loopback.

We run the four components `airflow standalone` runs (api-server, scheduler, dag-processor,
triggerer), each as its own process, rather than `standalone` itself: standalone's scheduler
and triggerer also start a log server hard-wired to listen on every interface, and here every
service binds to loopback. With LocalExecutor the API server reads task logs from local files,
so the log servers are not needed (--skip-serve-logs).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from infra.services.base import Service
from infra.services.keeper import kept
from lakehouse.core import secrets
from lakehouse.core.paths import REPO_ROOT
from lakehouse.core.processes import (
    Proc,
    ServiceError,
    processes_with_env,
    require_free_port,
    stop_processes,
    wait_until,
)

# The UI and REST API in one process, the API the running tasks call in another. An audited
# REST call (a pause, a trigger) writes its action log from the server's event loop; in one
# process with the tasks' API, it could wait on SQLite's lock held by a task's call whose
# commit needs that very loop: both stalled for SQLITE_BUSY_SECONDS, then the REST call
# failed with a 500. Apart, the task's call commits and the REST call gets the lock.
COMPONENTS = {
    "airflow-api-server": ["api-server", "--apps", "core"],
    "airflow-execution-api": ["api-server", "--apps", "execution"],
    "airflow-scheduler": ["scheduler", "--skip-serve-logs"],
    "airflow-dag-processor": ["dag-processor"],
    "airflow-triggerer": ["triggerer", "--skip-serve-logs"],
}
# Where the health endpoint reports each component's latest heartbeat (the API server has none).
HEARTBEATS = {
    "airflow-scheduler": ("scheduler", "latest_scheduler_heartbeat"),
    "airflow-dag-processor": ("dag_processor", "latest_dag_processor_heartbeat"),
    "airflow-triggerer": ("triggerer", "latest_triggerer_heartbeat"),
}
SQLITE_BUSY_SECONDS = 60
# A scheduler whose heartbeat is older than this is taken for dead, by itself too: its running
# tasks are reset as orphans. A heartbeat is stamped before it is written, and the write may
# wait SQLITE_BUSY_SECONDS for the lock, so with Airflow's 30 s a live scheduler resets its
# own tasks after such a wait. Twice the wait: a live scheduler survives two.
SCHEDULER_DEAD_AFTER = 2 * SQLITE_BUSY_SECONDS
SIMPLE_AUTH = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"


def write_ahead_log(database: Path) -> None:
    """The database in write-ahead-log mode (kept in the file): readers no longer block the
    writer nor it them, so the API's reads and the scheduler's writes stop queuing on one lock."""
    with contextlib.closing(sqlite3.connect(database)) as db:
        mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if mode != "wal":
        raise ServiceError(f"airflow: {database} refused write-ahead-log mode (it says {mode!r})")


def all_healthy(health: dict[str, Any]) -> bool:
    parts = ("metadatabase", "scheduler", "dag_processor", "triggerer")
    return all(health.get(p, {}).get("status") == "healthy" for p in parts)


# Where Airflow keeps the asset events its runs emitted and what they will trigger: links to
# runs first, then the events.
ASSET_EVENT_TABLES = (
    "dagrun_asset_event",
    "asset_alias_asset_event",
    "asset_dag_run_queue",
    "asset_event",
)


def forget_asset_events(database: Path) -> int:
    """Delete every asset event from a stopped Airflow's database, and the runs they queued;
    how many events there were. For a database that outlives the lakehouse its runs wrote
    (the tests' own Airflow): an event left over would trigger a run about data that is gone."""
    with contextlib.closing(sqlite3.connect(database)) as db, db:
        events = int(db.execute("SELECT count(*) FROM asset_event").fetchone()[0])
        for name in ASSET_EVENT_TABLES:
            db.execute(f"DELETE FROM {name}")
    return events


UNFINISHED_RUN = "state IN ('queued', 'running')"
UNFINISHED_TASK = (
    "(state IS NULL OR state IN ('scheduled', 'queued', 'running', 'up_for_retry', "
    "'up_for_reschedule', 'deferred', 'restarting'))"
)


def pause_dags_and_end_unfinished_runs(database: Path) -> int:
    """Pause every DAG, and mark failed every DAG run left queued or running and its tasks
    that had not ended, in a stopped Airflow's database; how many runs. For a database that
    outlives the lakehouse its runs wrote (the tests' own Airflow): a DAG a failed test left
    unpaused would start scheduled runs, and a run it left queued would start once a later
    test unpauses its DAG, each acting on a later test's lakehouse."""
    with contextlib.closing(sqlite3.connect(database)) as db, db:
        db.execute("UPDATE dag SET is_paused = 1")
        runs = int(db.execute(f"SELECT count(*) FROM dag_run WHERE {UNFINISHED_RUN}").fetchone()[0])
        db.execute(
            f"UPDATE task_instance SET state = 'failed' WHERE {UNFINISHED_TASK} AND EXISTS "
            "(SELECT 1 FROM dag_run r WHERE r.dag_id = task_instance.dag_id "
            f"AND r.run_id = task_instance.run_id AND r.{UNFINISHED_RUN})"
        )
        db.execute(f"UPDATE dag_run SET state = 'failed' WHERE {UNFINISHED_RUN}")
    return runs


def airflow_bin() -> str:
    return str(Path(sys.executable).parent / "airflow")


class Airflow(Service):
    name = "airflow"

    def procs(self) -> list[Proc]:
        return [self.proc(name) for name in COMPONENTS]

    def stop(self) -> bool:
        """The components, then what their tasks left running: a task under way (its
        supervisor, the job it runs, the job's JVM) lives in a session of its own and
        outlives the scheduler that started it. Every one of them carries this AIRFLOW_HOME."""
        stopped = super().stop()
        left = processes_with_env("AIRFLOW_HOME", str(self.data))
        if left:
            print(f"==> airflow: stopping {len(left)} task processes still running", flush=True)
            stop_processes(left)
        return stopped or bool(left)

    def address(self) -> str:
        svc = self.ctx.settings.services
        return f"http://{svc.bind_host}:{svc.airflow_port}"

    def execution_address(self) -> str:
        svc = self.ctx.settings.services
        return f"http://{svc.bind_host}:{svc.airflow_execution_port}"

    def password_file(self) -> Path:
        return self.data / "passwords.json"

    def database(self) -> Path:
        return self.data / "airflow.db"

    def database_url(self) -> str:
        """SQLite, whose one writer at a time makes the others wait: up to SQLITE_BUSY_SECONDS
        (the driver's default, 5 s, is shorter than a busy scheduler's write, and a request
        that waits longer fails with "database is locked", a 500 from the API)."""
        return f"sqlite:///{self.database()}?timeout={SQLITE_BUSY_SECONDS}"

    def env(self) -> dict[str, str]:
        svc = self.ctx.settings.services
        found = secrets.read_secrets()
        missing = [
            n
            for n in ("AIRFLOW_ADMIN_PASSWORD", "AIRFLOW_JWT_SECRET", "AIRFLOW_FERNET_KEY")
            if n not in found
        ]
        if missing:
            raise ServiceError(f"airflow: secrets {', '.join(missing)} missing; run `make setup`")
        home = self.data
        admin = self.ctx.settings.airflow.admin_user
        return {
            **os.environ,
            "AIRFLOW_HOME": str(home),
            # Tasks see the profile the services were started with, whatever the caller has.
            "TRIBUTARY_PROFILE": self.ctx.settings.profile,
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])
            ),
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO_ROOT / "dags"),
            # The Tributary view (plugins/tributary_view.py).
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO_ROOT / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": str(svc.airflow_parallelism),
            "AIRFLOW__CORE__AUTH_MANAGER": SIMPLE_AUTH,
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{admin}:admin",  # user:role
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.password_file()),
            "AIRFLOW__CORE__FERNET_KEY": found["AIRFLOW_FERNET_KEY"],
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.execution_address()}/execution/",
            # A task's call to that API gives up after this many seconds and is sent again (5
            # times): Airflow's 5 s is shorter than a wait for SQLite's lock, or than a cold
            # API process's first answer on a busy machine, and the task was killed.
            "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": str(SQLITE_BUSY_SECONDS + 30),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.database_url(),
            "AIRFLOW__API__HOST": svc.bind_host,
            "AIRFLOW__API__PORT": str(svc.airflow_port),
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__API__BASE_URL": self.address(),
            "AIRFLOW__API_AUTH__JWT_SECRET": found["AIRFLOW_JWT_SECRET"],
            # Pick up new DAG files (and the versions the forms offer) within seconds, not
            # the default five minutes.
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": str(svc.airflow_reparse_seconds),
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": str(svc.airflow_reparse_seconds),
            "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
            # A scheduler that dies takes LocalExecutor's workers (the supervisors of running
            # tasks) with it, and nothing can adopt their tasks: the next scheduler resets them
            # to run again once the dead one's heartbeat is older than
            # SCHEDULER_DEAD_AFTER. It looks at its start, then every this
            # many seconds rather than Airflow's 300.
            "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "30",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": str(SCHEDULER_DEAD_AFTER),
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
        }

    def health(self) -> dict[str, Any]:
        """The health endpoint's answer; {} while the API server does not give one."""
        import requests

        try:
            found: dict[str, Any] = requests.get(
                f"{self.address()}/api/v2/monitor/health", timeout=3
            ).json()
        except (requests.RequestException, ValueError):
            return {}
        return found

    def command(self, name: str) -> list[str]:
        """How `name` (a key of COMPONENTS) is started: under a keeper, which starts it again if
        it exits (infra/services/keeper.py); the tasks' API on a port of its own."""
        args = [airflow_bin(), *COMPONENTS[name]]
        if name == "airflow-execution-api":
            args += ["--port", str(self.ctx.settings.services.airflow_execution_port)]
        return kept(args)

    def healthy(self) -> bool:
        """Every component heartbeating, and the API the tasks call answering."""
        import requests

        if not all_healthy(self.health()):
            return False
        try:
            url = f"{self.execution_address()}/execution/health"
            return requests.get(url, timeout=10).status_code == 200
        except requests.RequestException:
            return False

    def start(self) -> None:
        svc = self.ctx.settings.services
        require_free_port(
            "airflow", svc.bind_host, svc.airflow_port, "TRIBUTARY__SERVICES__AIRFLOW_PORT"
        )
        require_free_port(
            "airflow",
            svc.bind_host,
            svc.airflow_execution_port,
            "TRIBUTARY__SERVICES__AIRFLOW_EXECUTION_PORT",
        )
        env = self.env()
        self.data.mkdir(parents=True, exist_ok=True)
        self._migrate(env)
        self._write_password_file()
        for name in COMPONENTS:
            self.proc(name).start(self.command(name), env=env, cwd=self.data)
        wait_until(
            self.healthy,
            timeout=240,
            what="waiting for Airflow's components",
            proc=self.proc("airflow-api-server"),
            every=3,
        )

    def restart_component(self, name: str, timeout: float = 240) -> None:
        """Start `name` (a key of COMPONENTS) again after it died, with the environment and
        folder the others run with, and wait until Airflow is healthy with `name` itself
        heartbeating: a killed component's last heartbeat keeps it reported healthy for up to
        [scheduler] scheduler_health_check_threshold (SCHEDULER_DEAD_AFTER for the scheduler)."""
        proc = self.proc(name)
        if proc.pid() is not None:
            raise ServiceError(f"airflow: {name} is running (pid {proc.pid()}); stop it first")
        started = datetime.now(UTC)
        proc.start(self.command(name), env=self.env(), cwd=self.data)
        self.wait_beating(name, started, timeout)

    def wait_beating(self, name: str, since: datetime, timeout: float = 240) -> None:
        """Wait until Airflow is healthy with `name` (a key of COMPONENTS) heartbeating after
        `since`. Raises ServiceError if it does not within `timeout` s, or exits."""

        def beating() -> bool:
            health = self.health()
            if not all_healthy(health):
                return False
            if name not in HEARTBEATS:
                return True
            part, key = HEARTBEATS[name]
            beat = health[part].get(key)
            return beat is not None and datetime.fromisoformat(beat) > since

        proc = self.proc(name)
        wait_until(beating, timeout=timeout, what=f"waiting for Airflow's {name}", proc=proc)

    def unpause(self, dag_ids: list[str], timeout: float = 180) -> None:
        """Unpause `dag_ids` through the REST API as the admin, once Airflow has parsed each
        (a fresh Airflow parses its DAG files in its first minute)."""
        import requests

        password = secrets.read_secrets()["AIRFLOW_ADMIN_PASSWORD"]
        api = f"{self.address()}/api/v2"
        login = requests.post(
            f"{self.address()}/auth/token",
            json={"username": self.ctx.settings.airflow.admin_user, "password": password},
            timeout=30,
        )
        if login.status_code != 201:
            raise ServiceError(f"airflow: login as the admin failed ({login.status_code})")
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {login.json()['access_token']}"
        deadline = time.monotonic() + timeout
        for dag_id in dag_ids:
            while session.get(f"{api}/dags/{dag_id}", timeout=30).status_code == 404:
                if time.monotonic() > deadline:
                    raise ServiceError(
                        f"airflow: {dag_id} is not parsed after {timeout:.0f} s; see the DAG "
                        "processor's log (make status)"
                    )
                time.sleep(2)
            reply = session.patch(f"{api}/dags/{dag_id}", json={"is_paused": False}, timeout=30)
            if reply.status_code != 200:
                raise ServiceError(f"airflow: cannot unpause {dag_id}: {reply.text[:300]}")
            print(f"    {dag_id}: unpaused")

    def _migrate(self, env: dict[str, str]) -> None:
        print("    preparing Airflow's metadata database (airflow db migrate)", flush=True)
        result = subprocess.run(
            [airflow_bin(), "db", "migrate"], env=env, cwd=self.data, capture_output=True, text=True
        )
        if result.returncode != 0:
            tail = (result.stderr or result.stdout).strip().splitlines()[-5:]
            raise ServiceError("airflow: `airflow db migrate` failed:\n" + "\n".join(tail))
        write_ahead_log(self.database())

    def _write_password_file(self) -> None:
        password = secrets.read_secrets()["AIRFLOW_ADMIN_PASSWORD"]
        path = self.password_file()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump({self.ctx.settings.airflow.admin_user: password}, out)
