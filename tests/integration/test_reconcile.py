"""Reconciliation against real Kafka, Spark and Delta: a day of events with every anomaly,
streamed by the speed layer and recomputed by the batch layer (tests/integration/
streamed_day.py, built once per test run and shared with the batch layer's tests), then
compared batch vs speed

- caught up, every difference is explained by the late events: nothing unexplained;
- with one window of speed.event_counts_1m corrupted on purpose (a Delta UPDATE on a copy),
  exactly that window is named, the job exits with the gate's status, `tributary compare`
  says the same, and the gate refuses (as a promotion step would ask it);
- the job's dq records are keyed by the run (a rerun replaces them) and its HTML report
  renders in headless Chromium with the chart and the tables.

The jobs (`python -m jobs.reconcile`, `tributary compare`) run in the test's process, each on
a copy of the lakehouse, with a state folder of its own beside it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from selenium.webdriver.common.by import By

from jobs.contract import Exit
from jobs.reconcile import REPORT_PREFIX
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import append_new, read_table, table_version
from lakehouse.core.paths import run_file_name
from lakehouse.core.tables import table
from lakehouse.reconcile import (
    EQUAL,
    Reconciliation,
    batch_source,
    gate,
    reconcile,
    recorded_gate,
    speed_source,
)
from lakehouse.transforms.views import VIEWS
from tests.integration.browser import Browser
from tests.integration.streamed_day import Day, recomputed_day, streamed_day
from tests.integration.tributary_here import run_tributary
from tests.jobs_in_process import Ran, RunJob

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class Lake:
    """The day streamed and recomputed (the copy "daily", which stays as it is); copies of it
    to spoil and to record in."""

    def __init__(self, day: Day, daily: Settings) -> None:
        self.day, self.settings, self.tmp = day, daily, day.tmp

    def copy(self, name: str) -> Settings:
        return self.day.copy(name, source="daily")

    def job(self, run_job_here: RunJob, name: str, module: str, *args: str) -> Ran:
        """`python -m <module> ARGS` (in this process) on the copy `name`, with its own state
        folder there: the job's report and lock stay in the test."""
        env = self.day.environment(name)
        if module == "jobs.cli":
            return run_tributary(run_job_here, *args, **env)
        return run_job_here(module, *args, **env)


@pytest.fixture(scope="module")
def lake(spark: SparkSession, kafka_up: str, tmp_path_factory: pytest.TempPathFactory) -> Lake:
    day = streamed_day(spark, tmp_path_factory)
    return Lake(day, recomputed_day(spark, day))


def batch_vs_speed(spark: SparkSession, settings: Settings, run_id: str) -> Reconciliation:
    return reconcile(
        spark,
        settings,
        batch_source(),
        speed_source(),
        list(VIEWS),
        run_id,
        datetime.now(UTC),
    )


@pytest.fixture(scope="module")
def clean(spark: SparkSession, lake: Lake) -> tuple[dict[str, Any], dict[str, dict[str, int]]]:
    """The clean comparison: a compared, equal window of speed.event_counts_1m to spoil,
    and every view's counts."""
    run = batch_vs_speed(spark, lake.settings, "clean")
    try:
        counts = next(v for v in run.views if v.view == "event_counts_1m")
        assert counts.result is not None
        # A window in the middle of the compared range, with events on both sides.
        candidates = (
            counts.result.where(f"status = '{EQUAL}' AND right_events > 1")
            .orderBy("window_start", "event_type")
            .collect()
        )
        assert candidates, "no equal window to corrupt"
        chosen = candidates[len(candidates) // 2].asDict()
        summary = {v.view: {**v.counts, "compared": v.compared} for v in run.views}
        verdict = gate(run)
    finally:
        run.release()
    assert verdict.passed, verdict.message()
    return chosen, summary


def test_caught_up_batch_and_speed_differ_only_by_late_events(
    clean: tuple[dict[str, Any], dict[str, dict[str, int]]], lake: Lake, spark: SparkSession
) -> None:
    _, summary = clean
    late = read_table(spark, table("speed.late_events"), lake.settings)
    assert late.count() > 10, "the anomalies must make the stream set events aside as late"
    for name, counts in summary.items():
        assert counts["compared"] > 20, f"{name}: too little compared to prove anything {counts}"
        assert counts["unexplained"] == 0, f"{name}: {counts}"
        assert counts["beyond_threshold"] == 0, f"{name}: {counts}"
    # Late events make batch and speed differ, and every such window is explained.
    assert summary["event_counts_1m"]["explained"] > 5, summary
    assert summary["active_users_10m"]["explained"] > 5, summary
    # The newest minutes are not final on the speed side yet: counted, not judged.
    assert summary["active_users_10m"]["open"] > 0, summary


def test_a_corrupted_speed_window_is_named_and_the_gate_refuses(
    clean: tuple[dict[str, Any], dict[str, dict[str, int]]],
    lake: Lake,
    spark: SparkSession,
    run_job_here: RunJob,
) -> None:
    chosen, summary = clean
    spoiled = lake.copy("corrupt")
    when = chosen["window_start"].strftime("%Y-%m-%d %H:%M:%S")
    # A partial row no batch wrote: three events more in the chosen window, however many
    # partial rows the window has.
    extra = spark.sql(
        f"SELECT timestamp'{when}' AS window_start, "
        f"timestamp'{when}' + INTERVAL 1 MINUTE AS window_end, "
        f"'{chosen['event_type']}' AS event_type, 3L AS events, "
        "CAST(0 AS DECIMAL(18,2)) AS amount_sum"
    )
    append_new(extra, table("speed.event_counts_1m"), spoiled)
    run = batch_vs_speed(spark, spoiled, "corrupt")
    try:
        verdict = gate(run)
        by_view = {v.view: v for v in run.views}
    finally:
        run.release()
    counts = by_view["event_counts_1m"]
    assert counts.counts["unexplained"] == 1 and counts.beyond_threshold == 1, counts.counts
    [row] = counts.unexplained
    assert (row["window_start"].replace(tzinfo=None), row["event_type"]) == (
        chosen["window_start"],
        chosen["event_type"],
    )
    assert row["diff_events"] == -3 and row["unexplained_events"] == -3
    for name in ("active_users_10m", "user_sessions"):
        assert by_view[name].counts["unexplained"] == 0, "only the corrupted view differs"
    assert by_view["event_counts_1m"].compared == summary["event_counts_1m"]["compared"]

    window = f"{chosen['window_start']:%Y-%m-%dT%H:%M:%SZ} event_type={chosen['event_type']}"
    assert not verdict.passed and verdict.beyond_threshold == 1
    assert "1 window(s) with an unexplained difference beyond threshold" in verdict.reasons[0]
    assert verdict.first_windows == [f"event_counts_1m {window}: {row['explanation']}"], (
        verdict.first_windows
    )
    assert not gate(run, require_compared=True).passed, "a promotion gate refuses as well"

    # The job: the gate's exit status, the count and the window in its output.
    job = lake.job(run_job_here, "corrupt", "jobs.reconcile", "--run-id", "corrupt-run")
    assert job.returncode == Exit.CHECKS_FAILED, job.stdout + job.stderr
    assert "reconciliation gate failed: 1 window(s)" in job.stderr
    assert window in job.stderr and window in job.stdout
    report = Path(job.stdout.split(REPORT_PREFIX)[1].splitlines()[0])
    assert report.exists() and report.parent == lake.tmp / "corrupt" / "state" / "dq" / "reports"
    recorded = recorded_gate(spark, spoiled, "corrupt-run")
    assert not recorded.passed and recorded.beyond_threshold == 1, recorded
    assert recorded.first_windows and window in recorded.first_windows[0]

    # `tributary compare`: the same summary in the terminal and a report of its own, no table
    # written.
    before = _versions(spark, spoiled)
    cli = lake.job(run_job_here, "corrupt", "jobs.cli", "compare", "--view", "event_counts_1m")
    assert cli.returncode == Exit.CHECKS_FAILED, cli.stdout + cli.stderr
    assert "event_counts_1m" in cli.stdout and window in cli.stdout
    assert "reconciliation gate failed" in cli.stdout
    assert _versions(spark, spoiled) == before, "compare without --record writes no table"
    own = Path(cli.stdout.split("report: ")[1].splitlines()[0])
    assert own != report and own.parent == report.parent, own
    html = own.read_text()
    assert "gate failed" in html and "<td>cli:batch-speed:" in html, html[:3000]


def test_the_job_records_each_run_once_under_its_id(
    lake: Lake, spark: SparkSession, run_job_here: RunJob
) -> None:
    spark_settings = lake.copy("recorded")
    first = lake.job(run_job_here, "recorded", "jobs.reconcile", "--run-id", "nightly-1")
    assert first.returncode == Exit.OK, first.stdout + first.stderr
    assert "reconciliation gate passed" in first.stdout
    rows = _dq_rows(spark, spark_settings, "nightly-1")
    again = lake.job(run_job_here, "recorded", "jobs.reconcile", "--run-id", "nightly-1")
    assert again.returncode == Exit.OK, again.stdout + again.stderr
    assert _dq_rows(spark, spark_settings, "nightly-1") == rows, "a rerun replaces its rows"
    runs, windows = rows
    assert runs == len(VIEWS)
    recorded = read_table(spark, table("dq.reconciliation_runs"), spark_settings)
    compared = sum(r["compared"] for r in recorded.collect())
    assert windows == compared > 0, "one windows row per compared key"
    assert recorded_gate(spark, spark_settings, "nightly-1").passed


def test_bad_arguments_exit_2_and_write_nothing(lake: Lake, run_job_here: RunJob) -> None:
    job = lake.job(run_job_here, "bad", "jobs.reconcile", "--left", "speed", "--right", "speed")
    assert job.returncode == Exit.BAD_REQUEST and "nothing written" in job.stderr
    assert "Traceback" not in job.stderr
    assert not (lake.tmp / "bad").exists()


def test_the_report_renders_in_chromium(browser: Browser, lake: Lake) -> None:
    reports = lake.tmp / "corrupt" / "state" / "dq" / "reports"
    report = reports / f"{run_file_name('corrupt-run')}.html"
    assert report.exists(), "the corruption test writes the report this test opens"
    browser.get(report.as_uri())
    assert "Reconciliation batch vs speed" in browser.title
    charts = browser.find_elements(By.CSS_SELECTOR, "svg.chart")
    assert {c.get_attribute("data-view") for c in charts} == set(VIEWS)
    assert all(c.size["width"] > 400 and c.size["height"] > 100 for c in charts)
    for chart in charts:  # both sides drawn (a gap in the windows splits a side's line)
        for side in ("series-left", "series-right"):
            assert chart.find_elements(By.CSS_SELECTOR, f".{side}"), (side, chart)
    assert browser.find_elements(By.CSS_SELECTOR, "svg.chart circle.unexplained")
    summary = browser.find_element(By.ID, "summary")
    assert summary.is_displayed() and "event_counts_1m" in summary.text
    [unexplained] = browser.find_elements(By.CSS_SELECTOR, "table.windows.unexplained")
    assert unexplained.is_displayed() and len(unexplained.find_elements(By.TAG_NAME, "tr")) == 2
    assert browser.find_element(By.ID, "verdict").text == "gate failed"
    browser.screenshot("reconcile_report")
    browser.execute_script("document.querySelector('svg.chart').scrollIntoView()")
    browser.screenshot("reconcile_report_chart")


def _dq_rows(spark: SparkSession, settings: Settings, run_id: str) -> tuple[int, int]:
    def count(name: str) -> int:
        df = read_table(spark, table(name), settings)
        return df.where(df["run_id"] == run_id).count()

    return count("dq.reconciliation_runs"), count("dq.reconciliation_windows")


def _versions(spark: SparkSession, settings: Settings) -> dict[str, int]:
    return {
        name: table_version(spark, table(name), settings) or -1
        for name in ("dq.reconciliation_runs", "dq.reconciliation_windows")
    }
