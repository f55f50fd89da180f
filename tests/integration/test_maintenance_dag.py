"""The maintenance DAG run for real through Airflow's REST API, on the services' lakehouse:
it looks after the bookkeeping tables the other tests wrote there and says what it did, table
by table. (What it does to a table, compaction and vacuum, is test_maintenance.py's.)"""

from __future__ import annotations

import json

from tests.integration.airflow_client import (
    BEFORE_SCHEDULED_RUNS,
    Api,
    run_alone,
    task_logs,
    task_states,
    tasks_report,
    trigger_run,
    wait_parsed,
)

DAG_ID = "maintenance"
RUN_TIMEOUT = 900


def test_the_maintenance_dag_compacts_and_vacuums_and_reports_each_table(api: Api) -> None:
    parsed = wait_parsed(api, DAG_ID)
    assert parsed["timetable_summary"] == "0 0 * * *"  # daily
    # Unpausing makes the scheduler create the run of the latest day: it would go first, or
    # right after this one; run_alone runs this one only.
    run_id = trigger_run(api, DAG_ID, run_after=BEFORE_SCHEDULED_RUNS)["dag_run_id"]
    _, tis = run_alone(api, DAG_ID, run_id, RUN_TIMEOUT)
    logs = task_logs(api, DAG_ID, run_id, tis)
    report = tasks_report(tis, logs)
    assert task_states(tis) == {"compact_and_vacuum": "success"}, report
    log = logs["compact_and_vacuum"]
    assert "batch_layer: ops.batch_runs" in log and "versions: ops.serving_pointer" in log, report
    [line] = [x for x in log.splitlines() if "maintenance result: " in x]
    result = json.loads(line.split("maintenance result: ", 1)[1].strip().rstrip("'\""))
    # One line per existing table it looked after (which exist depends on the tests before).
    looked_after = [x for x in log.splitlines() if " files, " in x and "old files deleted" in x]
    assert result["tables"] == len(looked_after), report
    assert result["files_after"] <= result["files_before"] and result["busy"] == [], result
