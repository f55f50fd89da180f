"""The commerce and stream_joins DAGs (dags/support/stream_dag.py), run here on a state folder
and a lakehouse of the test's own: every 5 minutes supervise, check_health, then reconcile;
a stop holds the stream down and skips the health check; the reconcile task runs
jobs.joins_reconcile for its own join (in-process) and is skipped before its first batch."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from lakehouse.core.config import get_settings
from lakehouse.core.paths import STATE_ENV
from tests.dags.conftest import load_dag_file

STREAMS = {
    "commerce": "lakehouse.commerce.supervisor:CommerceSupervisor",
    "stream_joins": "lakehouse.joins.windowed_supervisor:StreamJoinsSupervisor",
}


@pytest.fixture
def state(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    monkeypatch.setenv(STATE_ENV, str(tmp_path / "state"))
    get_settings.cache_clear()
    yield tmp_path / "state"
    monkeypatch.undo()
    get_settings.cache_clear()


@pytest.mark.parametrize("dag_id", sorted(STREAMS))
def test_the_dag_supervises_then_checks_and_reconciles_every_five_minutes(
    airflow_home: Path, dag_id: str
) -> None:
    dag = load_dag_file(dag_id).dag
    assert dag.schedule == timedelta(minutes=5) and dag.max_active_runs == 1
    assert {t.task_id: sorted(t.upstream_task_ids) for t in dag.tasks} == {
        "supervise": [],
        "check_health": ["supervise"],
        "reconcile": ["check_health", "supervise"],
    }
    assert dag.params.get_param("action").value == "ensure"


@pytest.mark.parametrize("dag_id", [*sorted(STREAMS), "enrichment"])
def test_each_form_offers_the_actions_its_stream_takes_and_only_those(
    airflow_home: Path, state: Path, dag_id: str
) -> None:
    """A reset for the streams whose tables can be rebuilt from their inputs (the enrichment,
    the stream joins), not for the commerce stream, whose order state is its topics' fold."""
    from dags.support.failure import Refused
    from dags.support.stream_dag import supervisor_of
    from dags.support.streams import apply_stream_action

    supervised = {**STREAMS, "enrichment": "lakehouse.joins.supervisor:EnrichmentSupervisor"}
    supervisor = supervisor_of(supervised[dag_id])
    form = load_dag_file(dag_id).dag.params.get_param("action").schema
    assert form["enum"] == list(supervisor.actions) == list(form["values_display"])
    assert ("reset" in supervisor.actions) == (dag_id != "commerce")
    if dag_id == "commerce":
        with pytest.raises(Refused, match="unknown action 'reset' for the commerce stream"):
            apply_stream_action(supervisor, "reset")


@pytest.mark.parametrize("dag_id", sorted(STREAMS))
def test_a_stop_holds_the_stream_down_and_skips_the_health_check(
    airflow_home: Path, state: Path, dag_id: str
) -> None:
    from airflow.sdk.exceptions import AirflowSkipException

    from dags.support.stream_dag import supervisor_of
    from dags.support.streams import apply_stream_action, check_stream_health

    supervisor = supervisor_of(STREAMS[dag_id])
    done = apply_stream_action(supervisor, "stop")
    assert not done["running"] and "stays stopped until a run" in done["outcome"], done
    with pytest.raises(AirflowSkipException, match="nothing to check"):
        check_stream_health(supervisor, done)
    again = apply_stream_action(supervisor_of(STREAMS[dag_id]), "ensure")
    assert "stopped on request" in again["outcome"]


@pytest.mark.parametrize("join", ["commerce", "stream_joins"])
def test_the_reconcile_task_is_skipped_before_the_streams_first_batch(jobs_here, join) -> None:
    from airflow.sdk.exceptions import AirflowSkipException

    from dags.support.judges import run_judge

    with pytest.raises(AirflowSkipException, match="no join's stream has completed a batch"):
        run_judge(
            "joins_reconcile", {"run_id": "r1"}, logging.getLogger("t"), jobs_here, ["--join", join]
        )
