"""The Airflow scheduler killed with SIGKILL mid-run and started again: the run completes, and
its work is done once (issue 33).

A batch_layer run recomputes an hour long ago (tests/integration/batch_hours.py). Once its
task is running and has started its job, the scheduler's whole process group is killed:
LocalExecutor's workers, each the supervisor of the task it runs, die with it, while the task's
own process (a process group of its own) and its job go on, unseen by Airflow. Five seconds
later the scheduler is started again (Airflow.restart_component). No executor here can adopt a
task whose supervisor is gone: once the dead scheduler's heartbeat is 120 s old, the new one's
orphan check (every 30 s, infra/services/airflow.py) resets the task and runs it again as a new
try. The job records the hour under the run's id, once; a try that finds its own run's record
standing ends the run as the lost try would have (dags/batch_layer.py).

Proven: the run and its task succeed; the hour was recomputed once, by the job the killed try
started (one row per view for the run in ops.batch_runs, one overwrite of the hour in each
view's table, the hour's counts equal to the ledger's); the run announced its interval once
(one event per asset). Printed: the task's processes left running at the kill, each try's
state, the task's states as they changed, when the hour was recorded, and the recovery time
(the kill to the run's success).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.compute as pc
import pytest

from infra.services.airflow import Airflow
from infra.services.keeper import MARK
from lakehouse.batch.recompute import Interval
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import delta_rs_location
from lakehouse.core.processes import processes_with_env
from lakehouse.core.small_tables import table_rows
from lakehouse.core.tables import table
from lakehouse.transforms.views import VIEWS
from tests.integration import airflow_client as af
from tests.integration.batch_hours import (
    DAG_ID,
    HOUR,
    PastHour,
    asset_events,
    past_hour_in_bronze,
    trigger_hour,
)
from tests.integration.service_logs import new_lines

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SCHEDULER = "airflow-scheduler"
TASK = "recompute"
JOB_STARTED = "==> batch layer: recomputing"  # the job's first line
DOWN_SECONDS = 5  # how long the scheduler stays dead
GRACE_SECONDS = 30  # how long a scheduler sent SIGTERM may take to stop
RUN_TIMEOUT = 900


@pytest.fixture(scope="module")
def past_hour(
    api: af.Api,
    spark: SparkSession,
    services_settings: Settings,
    kafka_up: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> PastHour:
    ledgers = tmp_path_factory.mktemp("scheduler_kill")
    return past_hour_in_bronze(api, spark, services_settings, ledgers)


def test_the_scheduler_killed_mid_run_and_restarted_completes_the_run_once(
    api: af.Api, airflow: Airflow, past_hour: PastHour, services_settings: Settings
) -> None:
    run_id = trigger_hour(api, past_hour.hour)
    with af.unpaused(api, DAG_ID):
        _wait_for_the_job(api, run_id)
        af.end_queued_scheduled_runs(api, DAG_ID)
        with _scheduler_killed(airflow) as killed_at:
            print("\n    left running: " + "; ".join(_task_processes(airflow)))
            time.sleep(DOWN_SECONDS)
        run, changes = _watch(api, run_id, killed_at)
        af.end_queued_scheduled_runs(api, DAG_ID)
    path = f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{TASK}"
    ti = af.expect_json(api.call("GET", path), 200)
    tries = af.expect_json(api.call("GET", f"{path}/tries"), 200)["task_instances"]
    mine = (pc.field("run_id") == run_id) & pc.field("view").isin(list(VIEWS))
    recorded = table_rows(services_settings, table("ops.batch_runs"), mine)
    _report(killed_at, run, tries, changes, recorded)
    logs = af.task_logs(api, DAG_ID, run_id, [ti])
    assert run["state"] == "success", af.tasks_report([ti], logs, lines=40)
    assert ti["state"] == "success", af.tasks_report([ti], logs, lines=40)

    # The hour recomputed once, by one job, and right.
    assert sorted(r["view"] for r in recorded) == sorted(VIEWS), recorded
    assert len({r["started_at"] for r in recorded}) == 1, recorded
    # By the job the killed try started, which went on without its supervisor.
    assert _recorded_by_try(tries, recorded) == 1, _tries(tries)
    hour = past_hour.hour
    assert _overwrites(services_settings, Interval(hour, hour + HOUR)) == dict.fromkeys(VIEWS, 1)
    counts = table_rows(
        services_settings,
        table("batch.event_counts_1m"),
        (pc.field("window_start") >= hour) & (pc.field("window_start") < hour + HOUR),
    )
    assert sum(r["events"] for r in counts) == past_hour.accepted_in_hour()

    # And announced once.
    events = asset_events(api, run_id)
    assert sorted(e["uri"] for e in events) == sorted(f"tributary://batch/{v}" for v in VIEWS)
    announced = {
        (
            datetime.fromisoformat(e["extra"]["interval_start"]),
            datetime.fromisoformat(e["extra"]["interval_end"]),
        )
        for e in events
    }
    assert announced == {(hour, hour + HOUR)}, events


@pytest.mark.restarts_airflow
def test_a_scheduler_that_exits_is_started_again_by_its_keeper(airflow: Airflow) -> None:
    """The scheduler's process alone ends (SIGTERM, as it ends when its loop raises): its
    keeper (infra/services/keeper.py) starts it again, and it heartbeats. Airflow's graceful
    stop can hang (its LocalExecutor waits for its workers, at times forever): a scheduler
    still there after GRACE_SECONDS is killed with its executor's workers, which is an exit
    all the same."""
    keeper = airflow.proc(SCHEDULER).pid()
    assert keeper is not None, f"the test Airflow's scheduler is not running ({SCHEDULER})"
    [scheduler] = _children(keeper)
    log = airflow.proc(SCHEDULER).log_file
    said_before = log.stat().st_size
    ended_at = datetime.now(UTC)
    os.kill(scheduler, signal.SIGTERM)
    if not _ended(scheduler, GRACE_SECONDS):
        print(f"\n    the scheduler was still stopping after {GRACE_SECONDS} s: killed")
        for pid in [*_children(scheduler), scheduler]:  # its executor's workers too
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    airflow.wait_beating(SCHEDULER, ended_at)
    assert airflow.proc(SCHEDULER).pid() == keeper
    [again] = _children(keeper)
    assert again != scheduler
    lines = new_lines(log, said_before).splitlines()
    restarts = [line for line in lines if line.startswith(MARK)]
    assert len(restarts) == 1 and restarts[0].endswith("starting it again"), restarts


def _ended(pid: int, seconds: float) -> bool:
    """Whether process `pid` ended within `seconds` (a zombie has ended: its keeper, the
    parent, reaps it)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.5)
    return False


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


@contextmanager
def _scheduler_killed(airflow: Airflow) -> Iterator[datetime]:
    """The scheduler's process group killed with SIGKILL; when the block ends, the scheduler
    started again (also when the block fails: the next tests need it). Yields the kill's time."""
    proc = airflow.proc(SCHEDULER)
    assert proc.pid() is not None, f"the test Airflow's scheduler is not running ({proc.pid_file})"
    killed_at = datetime.now(UTC)
    assert proc.stop(sig=signal.SIGKILL)
    try:
        yield killed_at
    finally:
        airflow.restart_component(SCHEDULER)


def _task_processes(airflow: Airflow) -> list[str]:
    """What the test Airflow's tasks run, each as its command line: the processes in the groups,
    none of its components', of those that carry its home in their environment. A task runner
    renames itself over its environment, so its job shows where its group is."""
    groups = set()
    for pid in processes_with_env("AIRFLOW_HOME", str(airflow.data)):
        with contextlib.suppress(OSError):
            groups.add(os.getpgid(pid))
    groups -= {p.pid() for p in airflow.procs()}
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if os.getpgid(int(entry.name)) in groups:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
                found.append(command.decode(errors="replace")[:70].strip())
    return found


def _overwrites(settings: Settings, interval: Interval) -> dict[str, int]:
    """How many commits replaced the interval's rows, in each view's batch table (its Delta
    log, read with delta-rs)."""
    from deltalake import DeltaTable

    found = {}
    for view in VIEWS.values():
        uri, options = delta_rs_location(settings, table(view.batch_table).path(settings))
        predicate = interval.condition(view.time_column)
        commits = DeltaTable(uri, storage_options=options).history()
        found[view.name] = sum(
            c.get("operationParameters", {}).get("predicate") == predicate for c in commits
        )
    return found


def _wait_for_the_job(api: af.Api, run_id: str) -> None:
    """Until the task is running and the job it started has said what it recomputes."""
    path = f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{TASK}"

    def started() -> bool:
        ti = af.expect_json(api.call("GET", path), 200)
        return ti["state"] == "running" and JOB_STARTED in af.task_log(api, DAG_ID, run_id, ti)

    af.wait_until(started, RUN_TIMEOUT, f"{DAG_ID} run {run_id}'s job to start")


def _watch(api: af.Api, run_id: str, since: datetime) -> tuple[dict[str, Any], list[str]]:
    """The run once it has ended (or RUN_TIMEOUT has passed), and its task's states as they
    changed, each with its try and the seconds since `since`."""
    path = f"/dags/{DAG_ID}/dagRuns/{run_id}"
    changes: list[str] = []
    seen = None
    deadline = time.monotonic() + RUN_TIMEOUT
    while True:
        ti = af.expect_json(api.call("GET", f"{path}/taskInstances/{TASK}"), 200)
        now = (ti["state"], ti["try_number"])
        if now != seen:
            seconds = (datetime.now(UTC) - since).total_seconds()
            changes.append(f"{now[0]} (try {now[1]}) at {seconds:.0f} s")
            seen = now
        run: dict[str, Any] = af.expect_json(api.call("GET", path), 200)
        if run["state"] in af.FINAL_STATES or time.monotonic() > deadline:
            return run, changes
        time.sleep(1)


def _recorded_by_try(tries: list[dict[str, Any]], recorded: list[dict[str, Any]]) -> int:
    """The try whose job recorded the run: the last one started before the record was."""
    began = min(r["started_at"] for r in recorded)
    return max(t["try_number"] for t in tries if datetime.fromisoformat(t["start_date"]) < began)


def _report(
    killed_at: datetime,
    run: dict[str, Any],
    tries: list[dict[str, Any]],
    changes: list[str],
    recorded: list[dict[str, Any]],
) -> None:
    print(f"    {_tries(tries)}")
    print("    task states since the kill: " + ", ".join(changes))
    if recorded:
        by = _recorded_by_try(tries, recorded)
        finished = _since(killed_at, recorded[0]["finished_at"])
        print(f"    the hour recorded {finished} after the kill, by the job of try {by}")
    if run["end_date"]:
        print(f"    recovery (kill -> the run's success): {_since(killed_at, run['end_date'])}")


def _since(start: datetime, moment: datetime | str) -> str:
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    return f"{(moment - start).total_seconds():.1f} s"


def _tries(tries: list[dict[str, Any]]) -> str:
    return "; ".join(
        f"try {t['try_number']} {t['state']} ({t['start_date']} -> {t['end_date']})" for t in tries
    )
