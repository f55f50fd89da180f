"""The kappa DAGs run for real by the running Airflow, against the services' Kafka `events`
topic and lakehouse (the local profile, as the services use it): parameters the REST API
refuses, and promote_version refusing a version that does not exist, with its reason. A dry run
and a real replay from kappa_replay's trigger form, announced and then promoted, are steps of
test_airflow_walk.

One real run per DAG: the paths a task decides (combinations only jobs.replay can refuse,
what promote and announce do with a dry run or an extension, batch_layer doing nothing in
kappa mode, rollback_version with nothing promoted) run through the tasks' functions in
tests/dags, on lakehouses of their own; so does the form's Extend (`--extend <version>`),
and test_replay.py extends versions with jobs.replay itself.

A replay's version is named `t<8 hex>` and removed afterwards, so the services' lakehouse
does not accumulate test versions. Nothing here promotes or rolls back the services' pointer.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from lakehouse.core.config import Settings
from lakehouse.replay.versions import VersionInfo, list_versions, pointer_history
from tests.integration import airflow_client as af

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DAG_ID = "kappa_replay"
RUN_TIMEOUT = 600  # a real replay starts Spark (~20 s) inside the task, on a busy machine


@pytest.mark.parametrize(
    ("conf", "param", "says"),
    [
        ({"start": "sideways"}, "start", "'sideways' is not one of"),
        ({"dry_run": "yes"}, "dry_run", "'yes' is not of type 'boolean'"),
        # Checked because rfc3339-validator is installed (jsonschema's date-time checker).
        ({"start": "timestamp", "timestamp": "yesterday"}, "timestamp", "is not a 'date-time'"),
    ],
    ids=["unknown-start", "dry-run-not-a-boolean", "timestamp-no-time"],
)
def test_the_api_refuses_invalid_params_with_the_reason(
    api: af.Api, conf: dict[str, Any], param: str, says: str
) -> None:
    af.wait_parsed(api, DAG_ID)
    before = _run_count(api, DAG_ID)
    reply = api.call("POST", f"/dags/{DAG_ID}/dagRuns", json={"logical_date": None, "conf": conf})
    detail = af.expect_json(reply, 400)["detail"]
    assert f"Invalid input for param {param}" in detail and says in detail, detail
    assert _run_count(api, DAG_ID) == before, "a refused trigger created a run"


# --- promote_version -------------------------------------------------------------------------

MISSING_VERSION = f"t{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def promotion_refused(api: af.Api) -> Iterator[str]:
    """promote_version triggered for a version that does not exist (its DAG unpaused until
    the module ends); the run's id."""
    dag_id = "promote_version"
    af.wait_parsed(api, dag_id)
    with af.unpaused(api, dag_id):
        run = af.trigger_run(api, dag_id, {"version": MISSING_VERSION, "force": False})
        yield run["dag_run_id"]
        af.wait_for_run(api, dag_id, run["dag_run_id"], RUN_TIMEOUT)


def test_promoting_a_version_that_does_not_exist_fails_with_the_reason(
    api: af.Api, spark: SparkSession, services_settings: Settings, promotion_refused: str
) -> None:
    dag_id = "promote_version"
    run_id = promotion_refused
    run, tis = af.wait_for_run(api, dag_id, run_id, RUN_TIMEOUT)
    logs = af.task_logs(api, dag_id, run_id, tis)
    assert run["state"] == "failed", af.tasks_report(tis, logs)
    assert af.task_states(tis) == {"promote": "failed"}
    assert f"no version '{MISSING_VERSION}'" in logs["promote"], logs["promote"]
    assert "nothing changed" in logs["promote"], logs["promote"]
    [error] = af.error_lines(api, dag_id, run_id, "promote")
    assert f"{MISSING_VERSION} was not promoted: versions: no version" in error, error
    assert [ti["try_number"] for ti in tis] == [1], "a refusal is not retried"
    # A promotion would have added its row (other tests' versions come and go meanwhile).
    history = pointer_history(services_settings)
    assert not [r for r in history if r["version"] == MISSING_VERSION], history


# --- kappa_replay's trigger form in headless Chromium ---------------------------------------


# --- helpers -------------------------------------------------------------------------------


def _run(
    api: af.Api, dag_id: str, conf: dict[str, Any] | None
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, str]]:
    """Trigger a manual run with `conf` and wait for it to finish (the DAG unpaused meanwhile,
    then paused again); the run, its task instances and their logs. Triggered before the DAG
    is unpaused and first in line, it goes before the scheduled run unpausing may create."""
    run = af.trigger_run(api, dag_id, conf, run_after=af.BEFORE_SCHEDULED_RUNS)
    with af.unpaused(api, dag_id):
        run, tis = af.wait_for_run(api, dag_id, run["dag_run_id"], RUN_TIMEOUT)
    assert run["state"] in af.FINAL_STATES, (
        f"{dag_id} run {run['dag_run_id']} still {run['state']!r} after {RUN_TIMEOUT} s"
    )
    return run, tis, af.task_logs(api, dag_id, run["dag_run_id"], tis)


def _run_count(api: af.Api, dag_id: str) -> int:
    reply = api.call("GET", f"/dags/{dag_id}/dagRuns", params={"limit": 1})
    return int(af.expect_json(reply, 200)["total_entries"])


def _versions(spark: SparkSession, settings: Settings) -> dict[str, VersionInfo]:
    return {v.version: v for v in list_versions(settings)}
