"""The generate_events DAG, triggered through the REST API with its form's parameters."""

from __future__ import annotations

from typing import Any

from tests.integration.airflow_client import (
    Api,
    expect_json,
    task_logs,
    tasks_report,
    trigger_run,
    unpaused,
    wait_for_run,
    wait_parsed,
)

DAG_ID = "generate_events"


def test_a_run_with_parameters_sends_the_events_and_writes_a_ledger(
    api: Api, kafka_up: str
) -> None:
    wait_parsed(api, DAG_ID)
    conf: dict[str, Any] = {
        "count": 40,
        "rate": 20.0,
        "realtime": False,
        "anomalies": "all",
        "seed": None,
    }
    with unpaused(api, DAG_ID):
        run = trigger_run(api, DAG_ID, conf)
        run, tis = wait_for_run(api, DAG_ID, run["dag_run_id"], timeout=180)
    logs = task_logs(api, DAG_ID, run["dag_run_id"], tis)
    assert run["state"] == "success", tasks_report(tis, logs)
    assert "sent 40/40 records" in logs["produce"], logs["produce"]
    assert "ledger:" in logs["produce"]


def test_an_out_of_range_parameter_is_refused_before_anything_runs(api: Api) -> None:
    wait_parsed(api, DAG_ID)
    reply = api.call(
        "POST", f"/dags/{DAG_ID}/dagRuns", json={"logical_date": None, "conf": {"count": -5}}
    )
    body = expect_json(reply, 400)
    assert "count" in str(body) or "-5" in str(body), body
