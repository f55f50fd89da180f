"""What the kappa_replay DAG asks jobs.replay to do: the scheduled run extends the active
version (the recent log); a triggered run passes its form on, conflicts included, for the
job to refuse with its reason, which fails the run at once; and what its promote and announce
tasks do with a dry run and an extension. The tasks run here, with jobs.replay in-process (it
refuses before it reads Kafka or starts Spark); tests/integration/test_kappa_replay_dag.py
runs the DAG in Airflow for real."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.dags.conftest import DagFile, load_dag_file, load_dag_module, no_job

if TYPE_CHECKING:
    from dags.support.job_runner import RunJob

FORM = {
    "start": "earliest",
    "timestamp": None,
    "offsets": None,
    "version": None,
    "extend": None,
    "dry_run": False,
    "auto_promote": False,
    "force": False,
    "mode": None,
}


@pytest.fixture(scope="module")
def kr(airflow_home: Path) -> Any:
    return load_dag_module("kappa_replay")


def test_the_scheduled_run_replays_the_recent_log(kr: Any) -> None:
    assert kr.replay_arguments(FORM, scheduled=True) == ["--scheduled"]
    # The form's default is a dry run, which the scheduled run (with the defaults) ignores.
    defaults = {**FORM, "dry_run": True}
    assert kr.replay_arguments(defaults, scheduled=True) == ["--scheduled"]


def test_a_triggered_run_is_a_dry_run_unless_unticked(airflow_home: Path) -> None:
    dag = load_dag_file("kappa_replay")
    assert dag.context("replay")["params"]["dry_run"] is True
    assert dag.context("replay", {"dry_run": False})["params"]["dry_run"] is False


def test_a_triggered_run_replays_from_the_forms_start(kr: Any) -> None:
    form = {**FORM, "start": "timestamp", "timestamp": "2026-11-25T10:00:00Z", "version": "v7"}
    assert kr.replay_arguments(form, scheduled=False) == [
        "--start",
        "timestamp",
        "--timestamp",
        "2026-11-25T10:00:00Z",
        "--version",
        "v7",
    ]


def test_extend_from_the_form_continues_that_version(kr: Any) -> None:
    form = {**FORM, "extend": "v3", "dry_run": True}
    assert kr.replay_arguments(form, scheduled=False) == ["--extend", "v3", "--dry-run"]


def test_extend_with_another_start_is_passed_on_for_the_job_to_refuse(kr: Any) -> None:
    form = {**FORM, "extend": "v3", "start": "offsets", "offsets": '{"0": 5}'}
    assert kr.replay_arguments(form, scheduled=False) == [
        "--extend",
        "v3",
        "--start",
        "offsets",
        "--offsets",
        '{"0": 5}',
    ]


@pytest.fixture(scope="module")
def kappa(airflow_home: Path) -> DagFile:
    return load_dag_file("kappa_replay")


@pytest.mark.parametrize(
    ("conf", "says"),
    [
        ({"start": "offsets"}, "start 'offsets' needs per-partition offsets"),
        ({"start": "earliest", "offsets": '{"0": 5}'}, "'earliest' takes neither"),
        ({"start": "offsets", "offsets": "first ten"}, "are not a JSON object of partition"),
    ],
    ids=["offsets-without-offsets", "earliest-with-offsets", "offsets-not-json"],
)
def test_a_combination_the_form_cannot_check_fails_with_the_jobs_reason(
    kappa: DagFile,
    jobs_here: RunJob,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    conf: dict[str, Any],
    says: str,
) -> None:
    """Airflow accepts these (each field is valid alone); jobs.replay refuses them, and the
    task fails at once (Refused: not retried), the job's reason in its log."""
    from dags.support.failure import Refused

    caplog.set_level(logging.INFO, logger="tributary.dags")
    context = kappa.context("replay", {**conf, "version": "t0refused"})
    with pytest.raises(Refused, match="the replay was refused") as refused:
        kappa.module.replay_log(context, run=jobs_here)
    assert type(refused.value) is Refused
    assert says in caplog.text and "nothing written" in caplog.text, caplog.text
    assert says in str(refused.value)
    assert not (tmp_path / "lakehouse").exists(), "a refused replay wrote something"


def test_announce_and_promote_run_only_after_a_replay_that_succeeded(kappa: DagFile) -> None:
    """A refused or failed replay leaves them upstream_failed: nothing announced or promoted."""
    for task_id in ("announce", "promote"):
        task = kappa.dag.get_task(task_id)
        assert task.upstream_task_ids == {"replay"}, task_id
        assert task.trigger_rule == "all_success", task_id


def test_a_dry_run_is_neither_announced_nor_promoted(
    kappa: DagFile, caplog: pytest.LogCaptureFixture
) -> None:
    from airflow.sdk.exceptions import AirflowSkipException

    caplog.set_level(logging.INFO, logger="tributary.dags")
    replayed = {"version": "v9", "dry_run": True, "auto_promote": True, "mode": "lambda"}
    with pytest.raises(AirflowSkipException, match="dry run: nothing to promote"):
        kappa.module.promote_replayed(replayed)
    with pytest.raises(AirflowSkipException, match="dry run: no version was written"):
        kappa.module.announce_version(replayed, {})
    assert "dry run: nothing to promote" in caplog.text


def test_an_extension_is_announced_when_it_read_something_new(kappa: DagFile) -> None:
    """The form's Extend: the version it continued is announced (the reconcile DAG compares
    it again), unless the log had nothing new for it."""
    from airflow.sdk.exceptions import AirflowSkipException
    from airflow.sdk.execution_time.context import OutletEventAccessors

    extended = {"version": "v3", "dry_run": False, "extended": True, "new_records": 10}
    outlets = OutletEventAccessors()
    kappa.module.announce_version(extended, outlets)
    assert outlets[kappa.module.REPLAY_ASSET].extra == {"version": "v3"}
    with pytest.raises(AirflowSkipException, match="v3 had nothing new to read"):
        kappa.module.announce_version({**extended, "new_records": 0}, OutletEventAccessors())


def test_an_extension_of_the_active_version_is_served_or_fails_with_its_gate(
    kappa: DagFile,
) -> None:
    from airflow.sdk.exceptions import AirflowSkipException

    from dags.support.failure import Refused

    active = {"version": "v3", "dry_run": False, "active": True, "auto_promote": True}
    with pytest.raises(AirflowSkipException, match="v3 is the active version and passed"):
        kappa.module.promote_replayed({**active, "served": True}, run=no_job)
    with pytest.raises(Refused, match="v3 was extended but its reconciliation"):
        kappa.module.promote_replayed({**active, "served": False}, run=no_job)


def test_the_joins_task_replays_the_joins_the_live_platform_runs_and_no_others(
    kappa: DagFile, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a replay wrote something new: jobs.enrich_replay once the enrichment has run
    live, jobs.replay_joins once the stream joins or the commerce stream have; a version's
    join that differs from its judge fails the task (not retried), naming the job."""
    import pyarrow as pa
    from airflow.sdk.exceptions import AirflowSkipException
    from deltalake import write_deltalake

    from dags.support.failure import Refused
    from dags.support.job_runner import JobOutcome
    from jobs.contract import Exit, result_line
    from lakehouse.core.config import get_settings

    lake = tmp_path / "lakehouse"
    monkeypatch.setenv("TRIBUTARY_PROFILE", "local")
    monkeypatch.setenv("TRIBUTARY__STORAGE__ROOT", str(lake))
    monkeypatch.setenv("TRIBUTARY__STORAGE__CHECKPOINTS", str(tmp_path / "checkpoints"))
    get_settings.cache_clear()
    replay_joins = kappa.module.replay_version_joins
    written = {"version": "v3", "dry_run": False, "new_records": 10}
    with pytest.raises(AirflowSkipException, match="dry run: no version was written"):
        replay_joins({**written, "dry_run": True}, run=no_job)
    with pytest.raises(AirflowSkipException, match="v3 had nothing new to read"):
        replay_joins({**written, "new_records": 0}, run=no_job)
    with pytest.raises(AirflowSkipException, match="no join runs live"):
        replay_joins(written, run=no_job)

    asked: list[tuple[str, ...]] = []

    def ending(status: Exit) -> RunJob:
        def run(module: str, args: list[str], on_line: Any, **_: Any) -> JobOutcome:
            asked.append((module, *args))
            job = module.removeprefix("jobs.")
            return JobOutcome(status, [result_line(job, {"equal": status == Exit.OK})])

        return run

    write_deltalake(str(lake / "ops" / "enrichment_progress"), pa.table({"batch_id": [0]}))
    assert replay_joins(written, run=ending(Exit.OK)) == {"enrich_replay": {"equal": True}}
    assert asked == [("jobs.enrich_replay", "v3")]

    write_deltalake(str(lake / "ops" / "join_progress"), pa.table({"batch_id": [0]}))
    asked.clear()
    with pytest.raises(Refused, match=r"jobs\.replay_joins: v3's joins differ") as failed:
        replay_joins(written, run=ending(Exit.CHECKS_FAILED))
    assert type(failed.value) is Refused
    assert asked == [("jobs.replay_joins", "v3"), ("jobs.enrich_replay", "v3")]
    get_settings.cache_clear()
