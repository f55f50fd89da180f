"""The cdc DAG's tasks, run here on a state folder of the test's own, with neither Connect nor
PostgreSQL: the database's catalog is faked where a table is checked, and Connect's REST calls
are recorded (none may be made where the run is refused). A table asked for that does not exist
or has no primary key fails the run at its first task, with one line, and nothing changes; a
FAILED connector is restarted through the REST API. The reconcile task runs jobs.cdc_reconcile
(in-process) on a lakehouse built in code: a table the stream got wrong fails it naming the table
and kind, equal tables pass, no batch yet skips it. tests/integration/test_cdc_dag.py runs the
DAG on the real services."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from lakehouse.cdc.connector import ConnectorStatus, TaskState
from lakehouse.core.config import get_settings
from lakehouse.core.paths import STATE_ENV
from tests.dags.conftest import DagFile, load_dag_file

pytestmark = pytest.mark.slow  # make test-fast leaves it out (docs/testing.md)


@pytest.fixture(scope="module")
def cdc(airflow_home: Path) -> DagFile:
    return load_dag_file("cdc")


@pytest.fixture
def state(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """A state folder of the test's own, a password, and Connect where nothing listens."""
    monkeypatch.setenv(STATE_ENV, str(tmp_path / "state"))
    monkeypatch.setenv("TRIBUTARY__CDC__CONNECT_URL", "http://127.0.0.1:1")
    get_settings.cache_clear()
    settings = get_settings()
    cdc = settings.cdc.model_copy(update={"password": SecretStr("test-password")})
    monkeypatch.setattr(
        "lakehouse.core.config.get_settings", lambda: settings.model_copy(update={"cdc": cdc})
    )
    yield tmp_path / "state"
    monkeypatch.undo()
    get_settings.cache_clear()


class FakeCatalog:
    """psycopg.connect for check_tables: answers its catalog query with `tables`
    ({name: has primary key}) and records every statement."""

    def __init__(self, tables: dict[str, bool]) -> None:
        self.tables = tables
        self.statements: list[str] = []

    def __call__(self, **_: Any) -> FakeCatalog:
        return self

    def __enter__(self) -> FakeCatalog:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def execute(self, query: str, params: tuple[list[str], str]) -> FakeCatalog:
        self.statements.append(query)
        self.rows = [(t, t in self.tables, self.tables.get(t, False)) for t in params[0]]
        return self

    def fetchall(self) -> list[tuple[str, bool, bool]]:
        return self.rows


@pytest.fixture
def rest_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    calls: list[tuple[str, str]] = []

    def refuse(_cdc: Any, method: str, path: str, *_: Any, **__: Any) -> Any:
        calls.append((method, path))
        raise AssertionError(f"the task called Connect: {method} {path}")

    monkeypatch.setattr("lakehouse.cdc.connector._request", refuse)
    monkeypatch.setattr("lakehouse.cdc.capture._request", refuse)
    return calls


def _state_files(state: Path) -> list[str]:
    return sorted(str(p.relative_to(state)) for p in state.rglob("*")) if state.exists() else []


def test_the_dag_runs_every_few_minutes_one_run_at_a_time(cdc: DagFile) -> None:
    dag = cdc.dag
    assert dag.dag_id == "cdc" and dag.max_active_runs == 1 and not dag.catchup
    assert {t.task_id for t in dag.tasks} == {
        "check_form",
        "connector",
        "snapshot",
        "supervise",
        "check_lag",
        "reconcile",
    }
    assert dag.get_task("check_lag").upstream_task_ids == {"supervise"}
    # What the stream wrote is judged whatever its lag.
    assert dag.get_task("reconcile").upstream_task_ids == {"supervise"}
    assert dag.get_task("snapshot").upstream_task_ids == {"check_form", "connector"}
    assert set(dag.params) == {"action", "table"}


@pytest.mark.parametrize(
    ("table", "catalog", "message"),
    [
        (
            "carts",
            {},
            "table public.carts does not exist in database shop; create it or take it out of "
            "cdc.tables; nothing was changed",
        ),
        ("audit_log", {"audit_log": False}, "table public.audit_log has no primary key"),
        ("Users; DROP TABLE users", {}, "is not a table name"),
    ],
)
def test_a_table_that_cannot_be_captured_fails_the_run_with_one_line_and_changes_nothing(
    cdc: DagFile,
    state: Path,
    rest_calls: list[tuple[str, str]],
    monkeypatch: pytest.MonkeyPatch,
    table: str,
    catalog: dict[str, bool],
    message: str,
) -> None:
    from dags.support.failure import Refused

    fake = FakeCatalog(catalog)
    monkeypatch.setattr("psycopg.connect", fake)
    before = _state_files(state)
    context = cdc.context("check_form", {"table": table})
    from dags.support import cdc_tasks
    from dags.support.run_params import checked_params

    with pytest.raises(Refused) as refused:
        cdc_tasks.check_form(checked_params(context))
    reason = str(refused.value)
    assert message in reason and "nothing was changed" in reason, reason
    assert "\n" not in reason
    # Only the catalog was read; no Connect call, no stream started, no signal sent.
    assert not rest_calls and _state_files(state) == before
    assert all(s.lstrip().upper().startswith("SELECT") for s in fake.statements)


def test_a_misspelt_parameter_fails_the_run_before_anything(cdc: DagFile, state: Path) -> None:
    from dags.support.failure import Refused
    from dags.support.run_params import checked_params

    context = cdc.context("check_form", {"tabel": "carts"})
    with pytest.raises(Refused, match=r"unknown parameter 'tabel' \(did you mean 'table'\?\)"):
        checked_params(context)


def test_a_table_that_can_be_captured_passes_the_form(
    cdc: DagFile, state: Path, rest_calls: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from dags.support import cdc_tasks
    from dags.support.run_params import checked_params

    monkeypatch.setattr("psycopg.connect", FakeCatalog({"carts": True}))
    form = cdc_tasks.check_form(checked_params(cdc.context("check_form", {"table": "carts"})))
    assert form == {"action": "ensure", "table": "carts"}
    scheduled = cdc.context("check_form", None, run_type="scheduled")
    assert cdc_tasks.check_form(checked_params(scheduled)) == {"action": "ensure", "table": None}


def test_no_table_skips_the_snapshot(state: Path, rest_calls: list[tuple[str, str]]) -> None:
    from airflow.sdk.exceptions import AirflowSkipException

    from dags.support import cdc_tasks

    with pytest.raises(AirflowSkipException, match="nothing to snapshot"):
        cdc_tasks.snapshot_table({"action": "ensure", "table": None})
    assert not rest_calls


def test_connect_down_fails_the_connector_task_saying_what_to_do(state: Path) -> None:
    from dags.support import cdc_tasks
    from dags.support.failure import TaskFailed

    with pytest.raises(TaskFailed) as failed:
        cdc_tasks.ensure_connector({"action": "ensure", "table": None})
    assert "Kafka Connect at http://127.0.0.1:1 cannot be reached" in str(failed.value)
    assert "make up" in str(failed.value)


def _status(state: str, task: str, trace: str | None = None) -> ConnectorStatus:
    return ConnectorStatus("shop-cdc", state, (TaskState(0, task, trace),))


def test_a_failed_connector_is_restarted_and_checked_again(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dags.support import cdc_tasks

    statuses = iter([_status("RUNNING", "FAILED", "boom"), _status("RUNNING", "FAILED", "boom")])
    restarts: list[str] = []
    monkeypatch.setattr("lakehouse.cdc.capture.connector_status", lambda _: next(statuses))
    monkeypatch.setattr("lakehouse.cdc.capture._update_config", lambda *_: False)
    monkeypatch.setattr("lakehouse.cdc.capture.ensure_changelog_topics", lambda *_: [])
    monkeypatch.setattr("lakehouse.cdc.capture.restart_connector", lambda c: restarts.append(c))
    running = _status("RUNNING", "RUNNING")
    monkeypatch.setattr("lakehouse.cdc.capture.wait_until_running", lambda *_: running)
    outcome = cdc_tasks.ensure_connector({"action": "ensure", "table": None})
    assert len(restarts) == 1
    assert outcome.startswith("restarted it (connector shop-cdc RUNNING (task 0 FAILED))")
    assert outcome.endswith("connector shop-cdc RUNNING (task 0 RUNNING)")


def test_a_connector_still_failing_after_its_restart_fails_the_task_with_its_trace(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dags.support import cdc_tasks
    from dags.support.failure import TaskFailed

    failed = _status("RUNNING", "FAILED", "org.postgresql.util.PSQLException: gone\n\tat x")
    monkeypatch.setattr("lakehouse.cdc.capture.connector_status", lambda _: failed)
    monkeypatch.setattr("lakehouse.cdc.capture._update_config", lambda *_: False)
    monkeypatch.setattr("lakehouse.cdc.capture.ensure_changelog_topics", lambda *_: [])
    monkeypatch.setattr("lakehouse.cdc.capture.restart_connector", lambda _: None)
    monkeypatch.setattr("lakehouse.cdc.connector.connector_status", lambda _: failed)
    with pytest.raises(TaskFailed) as task_failed:
        cdc_tasks.ensure_connector({"action": "ensure", "table": None})
    assert str(task_failed.value) == (
        "connector shop-cdc: task 0 FAILED: org.postgresql.util.PSQLException: gone; see the "
        "Connect log, fix, then restart"
    )


def test_a_stop_holds_the_changelog_stream_down_and_skips_the_lag_check(state: Path) -> None:
    from airflow.sdk.exceptions import AirflowSkipException

    from dags.support import cdc_tasks
    from lakehouse.cdc.supervisor import ChangelogSupervisor

    done = cdc_tasks.supervise_changelog({"action": "stop", "table": None})
    assert not done["running"] and done["outcome"] == (
        "the changelog stream was not running; it stays stopped until a run with action start "
        "or restart"
    )
    with pytest.raises(AirflowSkipException, match="nothing to check"):
        cdc_tasks.check_changelog(done)
    again = cdc_tasks.supervise_changelog({"action": "ensure", "table": None})
    assert "not starting the changelog stream: stopped on request" in again["outcome"]
    supervisor = ChangelogSupervisor(get_settings())
    assert supervisor.held() and not supervisor.status().running
    assert supervisor.proc.pid_file.name == "cdc.pid" and supervisor.stop_file.name == "cdc.stop"


def test_a_table_the_stream_got_wrong_fails_the_reconcile_task_naming_it(
    cdc: DagFile, spark, jobs_here, tmp_path: Path
) -> None:
    from dags.support import cdc_tasks
    from dags.support.failure import Refused
    from tests.captured_lakehouse import build_users, spoil_segment

    spoil_segment(spark, build_users(spark, tmp_path), "u1", "lost")
    context = cdc.context("reconcile")
    with pytest.raises(Refused) as refused:
        cdc_tasks.reconcile_changelog(context, run=jobs_here)
    lines = str(refused.value).splitlines()
    assert lines[0].startswith("CDC reconciliation failed, as of changelog batch 7")
    assert lines[1:] == [
        "users_current: 1 of 2 keys differ (first: user_id=u1: segment vip in the recompute, "
        "lost in the stream)"
    ]


def test_equal_tables_pass_the_reconcile_task_recorded_under_the_run_s_id(
    cdc: DagFile, spark, jobs_here, tmp_path: Path
) -> None:
    from dags.support import cdc_tasks
    from lakehouse.core.delta_io import read_table
    from lakehouse.reconcile.changelog import RUNS
    from tests.captured_lakehouse import build_users

    settings = build_users(spark, tmp_path)
    context = cdc.context("reconcile")
    result = cdc_tasks.reconcile_changelog(context, run=jobs_here)
    assert result["passed"] and result["run_id"] == f"cdc:{context['run_id']}"
    runs = {r["run_id"] for r in read_table(spark, RUNS, settings).collect()}
    assert runs == {f"cdc:{context['run_id']}"}


def test_before_the_stream_s_first_batch_the_reconcile_task_is_skipped(
    cdc: DagFile, spark, jobs_here
) -> None:
    from airflow.sdk.exceptions import AirflowSkipException

    from dags.support import cdc_tasks

    with pytest.raises(AirflowSkipException, match="completed no batch yet"):
        cdc_tasks.reconcile_changelog(cdc.context("reconcile"), run=jobs_here)
