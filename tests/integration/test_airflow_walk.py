"""A new user's path through the control plane, in headless Chromium against the running
Airflow, as issue 29 asks: log in; open the Tributary view and see the versions and the
stream's health charts; trigger a dry-run replay and open its plan from the run; run a real
replay; read in the view what promoting it will change, then promote it; open the
reconciliation report from a reconcile run; open the Data Docs, offline, from a data_quality
run of bronze, whose verdict is checked against an independent count; trigger a run with a
bad parameter and find its reason as the run's one ERROR line.

The REST API only waits for runs and reads what no page shows (the log's levels). Every
step's page is kept as a screenshot (tests/artifacts/screenshots/, walk_*). The services'
pointer and versions are put back as they were afterwards."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from lakehouse.core.config import Settings
from lakehouse.core.kafka_io import produce_json
from lakehouse.core.locks import exclusive_writer
from lakehouse.core.tables import VERSIONS
from lakehouse.generator.clickstream import generate_events
from lakehouse.replay.versions import active_version, list_versions
from lakehouse.speed.outputs import SpeedOutputs
from lakehouse.speed.stream import start_query
from tests.integration import airflow_client as af
from tests.integration.browser import (
    Browser,
    airflow_login,
    fill_field,
    form_field,
    open_trigger_form,
    submit_trigger_form,
    wait_for,
)
from tests.integration.data_docs_page import PAGE_LOADED, assert_rendered_offline
from tests.integration.quality_verdict import assert_bronze_verdict

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from selenium.webdriver.remote.webelement import WebElement

RUN_TIMEOUT = 600  # a replay or a promotion starts Spark inside its task, on a busy machine


@pytest.fixture
def version(spark: SparkSession, services_settings: Settings) -> Iterator[str]:
    """The walk's replay version; afterwards serving is rolled back from it and it is removed."""
    from lakehouse.replay.promotion import remove, rollback

    name = f"walk{uuid.uuid4().hex[:6]}"
    yield name
    with exclusive_writer(services_settings, VERSIONS, wait_seconds=60):
        if active_version(services_settings) == name:
            rollback(spark, services_settings)
        if any(
            v.version == name and v.status != "removed" for v in list_versions(services_settings)
        ):
            remove(spark, services_settings, name)


def test_a_new_user_runs_the_platform_from_the_airflow_ui(
    browser: Browser,
    airflow_up: str,
    api: af.Api,
    spark: SparkSession,
    services_settings: Settings,
    kafka_up: str,
    version: str,
) -> None:
    settings = services_settings
    # The platform has been running: events of the last hour in the log (about a second
    # apart, so the newest are half an hour old and the windows before the watermark are
    # final, to be compared), and the live stream over them, in this process, in
    # micro-batches, so the view has a history to chart.
    since = datetime.now(UTC) - timedelta(hours=1)
    events = list(generate_events(1200, seed=random.randint(1, 10**9), start=since))
    assert produce_json(settings, events) == len(events)
    start_query(
        spark, settings, SpeedOutputs.live(), available_now=True, max_offsets_per_trigger=400
    ).awaitTermination()

    airflow = settings.airflow
    assert airflow.admin_password is not None, "no Airflow admin password: run `make setup`"
    airflow_login(
        browser, airflow_up, airflow.admin_user, airflow.admin_password.get_secret_value()
    )
    browser.screenshot("walk_1_dags")

    # The Tributary view: the versions, and the stream's health over its last micro-batches.
    view = _tributary_view(browser, airflow_up)
    assert "Replay versions" in view and "Serving reads:" in view, view
    with _in_view(browser):
        charts = browser.find_elements(By.CSS_SELECTOR, "svg.chart")
        measures = {c.get_attribute("data-measure") for c in charts}
        assert {"freshness_seconds", "total_lag", "rows_per_second", "late_share"} <= measures
        assert browser.find_elements(By.CSS_SELECTOR, "svg.chart polyline"), "no line drawn"
        browser.screenshot("walk_2_tributary_view")

    # A dry run (the form's default), and its plan opened from the run: nothing written,
    # announced or promoted.
    def dry_run(form: WebElement) -> None:
        assert form_field(form, "Dry run").is_selected()
        assert not form_field(form, "Auto-promote").is_selected()

    before = list_versions(settings)
    run_id = _run_from_form(browser, api, airflow_up, "kappa_replay", dry_run, "success")
    tis = af.expect_json(api.call("GET", f"/dags/kappa_replay/dagRuns/{run_id}/taskInstances"), 200)
    states = af.task_states(tis["task_instances"])
    assert states == {
        "replay": "success",
        "announce": "skipped",
        "promote": "skipped",
        "joins": "skipped",
    }, states
    assert list_versions(settings) == before, "a dry run writes nothing"
    plan = _results(browser, airflow_up, "kappa_replay", run_id, "replay")
    assert "replay of 'events' from earliest" in plan and "s to start Spark" in plan, plan
    browser.screenshot("walk_3_replay_plan")

    # The replay itself, into a version named in the form.
    def real_run(form: WebElement) -> None:
        _set(browser, form, "Dry run", ticked=False)
        fill_field(form, "Version", version)

    run_id = _run_from_form(browser, api, airflow_up, "kappa_replay", real_run, "success")
    tis = af.expect_json(api.call("GET", f"/dags/kappa_replay/dagRuns/{run_id}/taskInstances"), 200)
    states = af.task_states(tis["task_instances"])
    assert states == {
        "replay": "success",
        "announce": "success",
        "promote": "skipped",
        "joins": "skipped",
    }, states
    logs = af.task_logs(api, "kappa_replay", run_id, tis["task_instances"])
    assert "auto-promote is off" in logs["promote"], logs["promote"]
    assert "no join runs live" in logs["joins"], logs["joins"]
    [info] = [v for v in list_versions(settings) if v.version == version]
    assert info.status == "caught_up" and (info.records or 0) >= len(events), info
    assert not info.active and info.by.startswith("airflow:kappa_replay/"), info
    # Announced on the asset the reconcile DAG listens to.
    [event] = af.expect_json(
        api.call(
            "GET",
            "/assets/events",
            params={"source_dag_id": "kappa_replay", "source_run_id": run_id},
        ),
        200,
    )["asset_events"]
    assert (event["uri"], event["extra"]) == ("tributary://replay/versions", {"version": version})

    # What promoting it changes, read in the view before the click; then the promotion (with
    # Force: in lambda mode its gate compares it with a batch run these hours never had).
    view = _tributary_view(browser, airflow_up)
    [row] = [line for line in view.splitlines() if line.startswith(version)]
    assert "nothing is served from it in lambda mode" in row, row
    with _in_view(browser):
        browser.screenshot("walk_4_before_promoting")

    def promote(form: WebElement) -> None:
        fill_field(form, "Version", version)
        _set(browser, form, "Force", ticked=True)

    _run_from_form(browser, api, airflow_up, "promote_version", promote, "success")
    assert active_version(settings) == version
    view = _tributary_view(browser, airflow_up)
    assert any(line.startswith(f"active {version}") for line in view.splitlines()), view

    # The reconciliation of the version with the live tables, its report opened from the run.
    def compare(form: WebElement) -> None:
        fill_field(form, "Left side", f"replay:{version}")
        fill_field(form, "Right side", "speed")

    run_id = _run_from_form(browser, api, airflow_up, "reconcile", compare, "success")
    report = _results(browser, airflow_up, "reconcile", run_id, "compare")
    assert "gate passed" in report and version in report, report[:2000]
    browser.screenshot("walk_5_reconciliation_report")

    # A data_quality run of bronze: its verdict, and its Data Docs, offline (styles and scripts
    # served locally).
    def bronze(form: WebElement) -> None:
        _choose(form, "Layer", "bronze")

    run_id = _run_from_form(browser, api, airflow_up, "data_quality", bronze, None)
    docs = _results(browser, airflow_up, "data_quality", run_id, "validate")
    assert "Data Docs" in docs, docs[:2000]
    assert_bronze_verdict(api, spark, services_settings, run_id)
    assert_rendered_offline("index.html", browser.execute_async_script(PAGE_LOADED))
    browser.screenshot("walk_6_data_docs")

    # A bad parameter: the run fails, and its one ERROR line is the reason, in words.
    def bad_name(form: WebElement) -> None:
        _set(browser, form, "Dry run", ticked=False)
        fill_field(form, "Version", "My Version")

    run_id = _run_from_form(browser, api, airflow_up, "kappa_replay", bad_name, "failed")
    errors = af.error_lines(api, "kappa_replay", run_id, "replay")
    assert len(errors) == 1, errors
    assert "version 'My Version' is not a simple identifier: use lowercase letters" in errors[0]
    browser.get(f"{airflow_up}/dags/kappa_replay/runs/{run_id}/tasks/replay")
    wait_for(browser, lambda d: "is not a simple identifier" in _body(d), "the reason in the log")
    browser.screenshot("walk_7_refused_run")
    assert "Traceback" not in _body(browser)


# --- steps ---------------------------------------------------------------------------------


def _run_from_form(
    browser: Browser,
    api: af.Api,
    airflow_up: str,
    dag_id: str,
    fill: Callable[[WebElement], None],
    expected: str | None,
) -> str:
    """Fill `dag_id`'s trigger form with `fill`, trigger it and wait for the run to end (in
    the `expected` state, when given); the run's id. The DAG is unpaused meanwhile, then
    paused again, as the tests found it."""
    with af.unpaused(api, dag_id):
        form = open_trigger_form(browser, airflow_up, dag_id)
        fill(form)
        run_id = submit_trigger_form(browser, form, dag_id)
        # The page of a running run redraws itself every few seconds: the browser leaves it
        # while the REST API waits, so the wait draws nothing.
        browser.get("about:blank")
        run, tis = af.wait_for_run(api, dag_id, run_id, RUN_TIMEOUT)
    assert run["state"] in af.FINAL_STATES, f"{dag_id} {run_id} still {run['state']}"
    if expected is not None:
        logs = af.task_logs(api, dag_id, run_id, tis)
        assert run["state"] == expected, af.tasks_report(tis, logs, lines=60)
    return run_id


def _results(browser: Browser, airflow_up: str, dag_id: str, run_id: str, task_id: str) -> str:
    """Open the task's Details tab, press its Results button (under Extra Links); the page it
    opens, as text."""
    browser.get(f"{airflow_up}/dags/{dag_id}/runs/{run_id}/tasks/{task_id}/details")
    link = wait_for(
        browser,
        lambda d: next(
            (e for e in d.find_elements(By.XPATH, "//a[normalize-space()='Results']")), None
        ),
        f"the Results button of {dag_id}.{task_id}",
    )
    target = link.get_attribute("href")
    assert target and "/tributary/" in target, target
    link.click()
    wait_for(browser, lambda d: d.current_url == target, f"{target} to open")
    return _body(browser)


def _tributary_view(browser: Browser, airflow_up: str) -> str:
    """The view in the UI's navigation; its text once drawn."""
    browser.get(f"{airflow_up}/plugin/tributary")
    with _in_view(browser):
        return str(
            wait_for(
                browser,
                lambda d: "Replay versions" in _body(d) and _body(d),
                "the Tributary view",
            )
        )


@contextmanager
def _in_view(browser: Browser) -> Iterator[None]:
    """Inside the frame the UI shows the view in."""
    frame = wait_for(browser, lambda d: d.find_element(By.TAG_NAME, "iframe"), "the view's frame")
    browser.switch_to.frame(frame)
    try:
        yield
    finally:
        browser.switch_to.default_content()


def _set(browser: Browser, form: WebElement, label: str, ticked: bool) -> None:
    """A checkbox ticked or not (clicked through the page: the input itself is hidden; the
    form draws it anew once clicked)."""
    if form_field(form, label).is_selected() != ticked:
        browser.execute_script("arguments[0].click();", form_field(form, label))
    wait_for(browser, lambda d: form_field(form, label).is_selected() == ticked, label)


def _choose(form: WebElement, label: str, value: str) -> None:
    """Pick `value` in a drop-down field, as a user would: type it, press Enter."""
    field = form_field(form, label)
    field.click()
    field.send_keys(value, Keys.ENTER)
    chosen = form.find_element(By.XPATH, f".//input[@type='hidden'][@value={value!r}]")
    assert chosen.get_attribute("name") == f"element_{label.lower()}", chosen


def _body(browser: Any) -> str:
    return str(browser.find_element(By.TAG_NAME, "body").text)
