"""The batch_layer DAG's data intervals are the hours it recomputes, and it publishes one
asset per batch view. Its task, run here: in kappa mode it does nothing and says why; a
reversed interval fails at once with jobs.batch_layer's reason (the job, in-process, refuses
before it starts Spark); a try that finds its own run's record of the interval standing ends
the run. tests/integration/test_batch_layer_dag.py runs the DAG for real."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pendulum
import pytest

from tests.dags.conftest import DagFile, load_dag_file, no_job

if TYPE_CHECKING:
    from dags.support.job_runner import RunJob


def datetime(*args: int) -> pendulum.DateTime:
    # Airflow's timetables work on pendulum's DateTime.
    return pendulum.datetime(*args, tz="UTC")


@pytest.fixture(scope="module")
def batch_dag(airflow_home: Path) -> Any:
    from airflow.dag_processing.dagbag import DagBag

    from tests.dags.conftest import DAGS_FOLDER

    bag = DagBag(dag_folder=DAGS_FOLDER / "batch_layer.py", safe_mode=False)
    assert not bag.import_errors, bag.import_errors
    return bag.dags["batch_layer"]


def test_a_manual_run_recomputes_the_last_complete_hour(batch_dag: Any) -> None:
    run_after = datetime(2026, 11, 26, 10, 25)
    interval = batch_dag.timetable.infer_manual_data_interval(run_after=run_after)
    assert (interval.start, interval.end) == (
        datetime(2026, 11, 26, 9),
        datetime(2026, 11, 26, 10),
    )


def test_scheduled_runs_cover_consecutive_hours(batch_dag: Any) -> None:
    from airflow.timetables.base import DataInterval, TimeRestriction

    first = batch_dag.timetable.next_dagrun_info(
        last_automated_data_interval=DataInterval(
            datetime(2026, 11, 26, 9), datetime(2026, 11, 26, 10)
        ),
        restriction=TimeRestriction(datetime(2026, 1, 1), None, catchup=True),
    )
    assert (first.data_interval.start, first.data_interval.end) == (
        datetime(2026, 11, 26, 10),
        datetime(2026, 11, 26, 11),
    )


def test_a_backfill_runs_each_hour_with_that_hour_as_its_interval(batch_dag: Any) -> None:
    """What Airflow's backfill (API or CLI) makes of a range: the runs the serialized DAG's
    timetable gives, as the API server computes them, one per hour from the first."""
    from airflow.serialization.serialized_objects import DagSerialization

    served = DagSerialization.from_dict(DagSerialization.to_dict(batch_dag))
    infos = served.iter_dagrun_infos_between(datetime(2026, 11, 26, 9), datetime(2026, 11, 26, 11))
    assert [(i.data_interval.start, i.data_interval.end) for i in infos] == [
        (datetime(2026, 11, 26, h), datetime(2026, 11, 26, h + 1)) for h in (9, 10, 11)
    ]


def test_the_recompute_task_publishes_an_asset_per_view(batch_dag: Any) -> None:
    from lakehouse.transforms.views import VIEWS

    outlets = batch_dag.get_task("recompute").outlets
    assert sorted(a.name for a in outlets) == sorted(f"batch.{v}" for v in VIEWS)


def test_a_run_waits_for_the_previous_one(batch_dag: Any) -> None:
    assert batch_dag.max_active_runs == 1


@pytest.fixture(scope="module")
def batch(airflow_home: Path) -> DagFile:
    return load_dag_file("batch_layer")


def test_in_kappa_mode_a_run_does_nothing_and_says_why(
    batch: DagFile, caplog: pytest.LogCaptureFixture
) -> None:
    from airflow.sdk.exceptions import AirflowSkipException

    caplog.set_level(logging.INFO, logger="tributary.dags")
    context = batch.context("recompute", {"mode": "kappa"})
    with pytest.raises(AirflowSkipException, match="the kappa_replay DAG replays the log"):
        batch.module.recompute_run_interval(context, run=no_job)
    assert "kappa mode: there is no batch layer; corrections come from replays" in caplog.text


def test_a_reversed_interval_from_the_form_fails_with_the_reason(
    batch: DagFile, jobs_here: RunJob, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """Failed at once (Refused: the DAG's retries do not apply)."""
    from dags.support.failure import Refused

    caplog.set_level(logging.INFO, logger="tributary.dags")
    conf = {"start": "2026-01-01T11:00:00Z", "end": "2026-01-01T10:00:00Z"}
    context = batch.context("recompute", conf)
    with pytest.raises(Refused, match="bad interval") as refused:
        batch.module.recompute_run_interval(context, run=jobs_here)
    assert type(refused.value) is Refused
    assert "empty or reversed" in caplog.text, caplog.text
    assert "empty or reversed" in str(refused.value)
    assert not (tmp_path / "lakehouse").exists()


def test_nothing_to_recompute_skips_the_task_with_the_jobs_reason_and_force_is_passed_on(
    batch: DagFile, jobs_here: RunJob
) -> None:
    """Exit 3 (nothing to do: no events, or the interval's last run stands, each with its own
    line) skips the task with the job's line; the form's Force reaches the job."""
    from airflow.sdk.exceptions import AirflowSkipException

    asked: list[list[str]] = []

    def job(module: str, args: list[str], *rest: Any, **kw: Any) -> Any:
        asked.append(args)
        return jobs_here(module, args, *rest, **kw)

    conf = {"start": "2026-01-01T10:00:00Z", "end": "2026-01-01T11:00:00Z", "force": True}
    context = batch.context("recompute", conf)
    with pytest.raises(AirflowSkipException, match="does not exist yet: run the speed layer"):
        batch.module.recompute_run_interval(context, run=job)
    assert asked and asked[0][-1] == "--force", asked


def test_a_try_that_finds_its_own_runs_record_succeeds_and_announces_the_interval(
    batch: DagFile,
) -> None:
    """An earlier try recomputed and recorded the interval but never ended (Airflow runs the
    task again when a killed scheduler took its supervisor: test_airflow_scheduler_kill.py):
    this try succeeds and names the interval on the assets' events. Another run's standing
    record still skips the task."""
    from airflow.sdk.exceptions import AirflowSkipException

    from dags.support.job_runner import JobOutcome
    from jobs.contract import result_line

    conf = {"start": "2026-01-01T10:00:00Z", "end": "2026-01-01T11:00:00Z"}
    context = batch.context("recompute", conf)

    def standing(run_id: str) -> RunJob:
        said = [
            result_line("batch", {"interval": "[...)", "standing_run": run_id}),
            f"batch layer: [...) unchanged since run {run_id} (bronze unchanged): nothing",
        ]
        return lambda *_, **__: JobOutcome(3, said)

    summary = batch.module.recompute_run_interval(context, run=standing(context["run_id"]))
    assert summary["recorded_by_earlier_try"] is True
    for asset in batch.module.ASSETS:
        extra = context["outlet_events"][asset].extra
        assert extra == {"interval_start": conf["start"], "interval_end": conf["end"]}
    with pytest.raises(AirflowSkipException, match="unchanged since run other"):
        batch.module.recompute_run_interval(context, run=standing("other"))


def test_the_revenue_task_follows_the_views_and_publishes_its_asset(batch_dag: Any) -> None:
    """It runs whether the views were recomputed or skipped (unchanged, no events): the
    dimensions' history moves on its own."""
    task = batch_dag.get_task("revenue")
    assert task.upstream_task_ids == {"recompute"}
    assert task.trigger_rule == "none_failed"
    assert [a.name for a in task.outlets] == ["batch.revenue_by_segment"]


def test_the_revenue_task_skips_in_kappa_mode_and_before_the_enrichment_ran(
    batch: DagFile, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from airflow.sdk.exceptions import AirflowSkipException

    from lakehouse.core.config import get_settings

    monkeypatch.setenv("TRIBUTARY__STORAGE__ROOT", str(tmp_path / "lakehouse"))
    get_settings.cache_clear()
    try:
        kappa = batch.context("revenue", {"mode": "kappa"})
        with pytest.raises(AirflowSkipException, match="kappa mode"):
            batch.module.recompute_run_revenue(kappa, run=no_job)
        conf = {"start": "2026-01-01T10:00:00Z", "end": "2026-01-01T11:00:00Z"}
        with pytest.raises(AirflowSkipException, match="enrichment stream has never run"):
            batch.module.recompute_run_revenue(batch.context("revenue", conf), run=no_job)
    finally:
        get_settings.cache_clear()


def test_the_revenue_task_runs_the_job_over_the_interval_and_skips_on_its_reason(
    batch: DagFile, jobs_here: RunJob, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the enrichment stream has a batch, the task runs jobs.batch_revenue (here
    in-process) over the interval, the form's Force passed on; its exit 3 (no bronze yet,
    another run standing) skips the task with its line; this run's own record standing (an
    earlier try's) ends it as that try would have."""
    from airflow.sdk.exceptions import AirflowSkipException

    from dags.support.job_runner import JobOutcome
    from jobs.contract import result_line
    from lakehouse.core.config import get_settings
    from lakehouse.core.delta_io import append_rows_batch
    from lakehouse.joins.outputs import EnrichmentOutputs
    from tests.lakehouses import local_lakehouse

    settings = local_lakehouse(tmp_path)
    progress = {
        "app_id": "enrich:q",
        "batch_id": 0,
        "events": 0,
        "corrected": 0,
        "versions": {},
        "processed_at": pendulum.now("UTC"),
        "duration_seconds": 0.0,
    }
    target = EnrichmentOutputs.live().progress
    append_rows_batch(spark, [progress], target, settings, "enrich:q", 0)
    monkeypatch.setenv("TRIBUTARY__STORAGE__ROOT", settings.storage.root)
    get_settings.cache_clear()
    asked: list[list[str]] = []

    def job(module: str, args: list[str], *rest: Any, **kw: Any) -> Any:
        asked.append([module, *args])
        return jobs_here(module, args, *rest, **kw)

    conf = {"start": "2026-01-01T10:00:00Z", "end": "2026-01-01T11:00:00Z"}
    context = batch.context("revenue", conf)

    def standing(run_id: str) -> RunJob:
        said = [
            result_line("batch_revenue", {"interval": "[...)", "standing_run": run_id}),
            f"batch revenue: [...) unchanged since run {run_id} (...): nothing recomputed",
        ]
        return lambda *_, **__: JobOutcome(3, said)

    try:
        with pytest.raises(AirflowSkipException, match="does not exist yet: run the speed layer"):
            batch.module.recompute_run_revenue(context, run=job)
        # Another run's rows stand: skipped with the job's line. This run's own (an earlier
        # try recorded it, then lost its supervisor): announced as that try would have.
        with pytest.raises(AirflowSkipException, match="unchanged since run other"):
            batch.module.recompute_run_revenue(context, run=standing("other"))
        own = batch.module.recompute_run_revenue(context, run=standing(context["run_id"]))
        forced = batch.context("revenue", {**conf, "force": True})
        with pytest.raises(AirflowSkipException):
            batch.module.recompute_run_revenue(forced, run=job)
    finally:
        get_settings.cache_clear()
    assert own["recorded_by_earlier_try"] is True
    extra = context["outlet_events"][batch.module.REVENUE_ASSET].extra
    assert extra == {"interval_start": conf["start"], "interval_end": conf["end"]}
    interval = ["--start", conf["start"], "--end", conf["end"]]
    assert asked == [
        ["jobs.batch_revenue", *interval, "--run-id", context["run_id"]],
        ["jobs.batch_revenue", *interval, "--run-id", forced["run_id"], "--force"],
    ]
